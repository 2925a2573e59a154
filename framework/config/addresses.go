package config

import "net/netip"

// framework/addresses lays out the addresses on the VLAN and is the one
// place that knows the plan; Validate asks it whether the address flags fit.
// It imports this package (ForConfig reads a *Config), so this package
// cannot import it: it installs its check here from its init instead. Every
// binary that runs the suite builds a plan (run.New calls
// addresses.ForConfig), so links it and gets the check; where it is not
// linked nothing builds a plan, and ForConfig runs the same check anyway.

// AddressFlags are the address flags, parsed, as addresses.Check takes them.
type AddressFlags struct {
	Subnet, OtherSubnet   netip.Prefix
	Gateway, OtherGateway netip.Addr
	Guest                 netip.Prefix
}

var addressCheck func(AddressFlags) error

// SetAddressCheck installs framework/addresses' check of the address flags;
// only that package calls it.
func SetAddressCheck(check func(AddressFlags) error) { addressCheck = check }

// validateAddresses is the plan's verdict on flags that each parsed and lie
// in their subnets: nil when no plan is linked in to ask.
func validateAddresses(f AddressFlags) error {
	if addressCheck == nil {
		return nil
	}
	return addressCheck(f)
}
