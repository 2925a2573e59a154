// Package kernel is the preflight: which kernel options the lab needs (the
// list is also in suites/config, kselftest style) and which of them the
// running kernel lacks, found by trying each in a throwaway namespace.
package kernel

import (
	"errors"
	"fmt"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/cozystack/vlan-conformance/framework/fabric"
)

// Option is one kernel option and how to prove it is there.
type Option struct {
	Name  string // CONFIG_...
	Why   string
	probe func(h *netlink.Handle) error
}

// Options the lab tier needs.
var Options = []Option{
	{"CONFIG_VETH", "trunk cables, pod interfaces, the guest's NIC", func(h *netlink.Handle) error {
		return h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "pf-veth0"}, PeerName: "pf-veth1"})
	}},
	{"CONFIG_VLAN_8021Q", "uplink.100 and the gateway's trunk.100", func(h *netlink.Handle) error {
		p, err := h.LinkByName("pf-veth0")
		if err != nil {
			return err
		}
		return h.LinkAdd(&netlink.Vlan{LinkAttrs: netlink.LinkAttrs{Name: "pf-veth0.100", ParentIndex: p.Attrs().Index}, VlanId: 100})
	}},
	{"CONFIG_BRIDGE", "br100 on the node, k6t-net1 in the launcher", func(h *netlink.Handle) error {
		return h.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "pf-br"}})
	}},
	{"CONFIG_MACVLAN", "the macvlan NAD", func(h *netlink.Handle) error {
		p, err := h.LinkByName("pf-veth0")
		if err != nil {
			return err
		}
		return h.LinkAdd(&netlink.Macvlan{LinkAttrs: netlink.LinkAttrs{Name: "pf-mv", ParentIndex: p.Attrs().Index}, Mode: netlink.MACVLAN_MODE_BRIDGE})
	}},
	{"CONFIG_DUMMY", "the launcher's dummy keeping the pod interface's name and MAC", func(h *netlink.Handle) error {
		return h.LinkAdd(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: "pf-dummy"}})
	}},
}

// Missing returns the options the running kernel lacks. It creates one
// namespace (vcf-preflight) and removes it.
func Missing() ([]Option, error) {
	ns, err := fabric.NewNamespace("preflight")
	if err != nil {
		return nil, fmt.Errorf("preflight: %w", err)
	}
	defer ns.Delete()
	var missing []Option
	for _, o := range Options {
		if err := o.probe(ns.Handle); err != nil {
			missing = append(missing, o)
		}
	}
	return missing, nil
}

// Describe lists options one per line, with why the suite needs them.
func Describe(opts []Option) string {
	var b strings.Builder
	for _, o := range opts {
		fmt.Fprintf(&b, "  %-20s %s\n", o.Name, o.Why)
	}
	return b.String()
}

// ErrMissing is returned when the kernel lacks options and no lab VM may be used.
var ErrMissing = errors.New("the running kernel lacks options the lab needs")

// Has8021Q reports whether VLAN sub-interfaces can be made here (the
// cluster tier's kind nodes share this kernel).
func Has8021Q() bool {
	missing, err := Missing()
	if err != nil {
		return false
	}
	for _, o := range missing {
		if o.Name == "CONFIG_VLAN_8021Q" {
			return false
		}
	}
	return true
}
