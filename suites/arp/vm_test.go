package arp

import "testing"

// vm-arp is handed on to ARP-07's restarts by the first spec that does
// not take it: ARP-05's and ARP-06's take guests of their own, every
// other ARP spec of the container takes vm-arp.
func TestOnlyARP05AndARP06LeaveVMArpFree(t *testing.T) {
	for _, c := range []string{"ARP-01", "ARP-02", "ARP-03", "ARP-04", "ARP-08", "ARP-07"} {
		if !takes("vm-arp", c) {
			t.Errorf("%s's spec does not take vm-arp: the container would hand it on before that spec", c)
		}
	}
	for _, c := range []string{"ARP-05", "ARP-06"} {
		if takes("vm-arp", c) {
			t.Errorf("%s's spec takes vm-arp: it could not run beside ARP-07's restarts", c)
		}
	}
	if takes("vm-none", "ARP-01") {
		t.Error("a guest the container does not have is taken")
	}
}
