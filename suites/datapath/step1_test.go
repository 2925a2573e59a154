package datapath

import (
	"testing"

	"github.com/cozystack/vlan-conformance/framework/evidence"
)

// Step 1's path as NODE-03 reads it: the uplink, the VLAN sub-interface
// br100 enslaves (on an untagged trunk the uplink itself), br100; a pod's
// veth is the NAD's end, not a hop of it.
func TestPathOfStep1(t *testing.T) {
	tagged := map[string]evidence.Link{
		"uplink":     {Name: "uplink", Kind: "veth", MTU: 1500},
		"uplink.100": {Name: "uplink.100", Kind: "vlan", MTU: 1500, Master: "br100", Parent: "uplink", VLANID: 100},
		"br100":      {Name: "br100", Kind: "bridge", MTU: 1400},
		"veth1":      {Name: "veth1", Kind: "veth", MTU: 9000, Master: "br100"},
		"mgmt":       {Name: "mgmt", Kind: "dummy", MTU: 1500},
	}
	chain, err := pathOf(tagged)
	if err != nil {
		t.Fatal(err)
	}
	if got := describeChain(chain); got != "uplink 1500 ≥ uplink.100 1500 ≥ br100 1400" {
		t.Errorf("tagged: %s", got)
	}
	if on := onTheVLAN(tagged); !on["br100"] || !on["uplink.100"] || !on["uplink"] || !on["veth1"] || on["mgmt"] {
		t.Errorf("on the VLAN: %v; want br100, its ports and their parents, not mgmt", on)
	}
	untagged := map[string]evidence.Link{
		"uplink": {Name: "uplink", Kind: "veth", MTU: 1500, Master: "br100"},
		"br100":  {Name: "br100", Kind: "bridge", MTU: 1500},
	}
	if chain, err = pathOf(untagged); err != nil || describeChain(chain) != "uplink 1500 ≥ br100 1500" {
		t.Errorf("untagged: %v, %v", describeChain(chain), err)
	}
	if _, err := pathOf(map[string]evidence.Link{"br100": {Name: "br100", Kind: "bridge"}}); err == nil {
		t.Error("a br100 without the VLAN's link gave a path")
	}
}

// The NAD's MTU: the one it declares, or the veth's the bridge plugin
// makes without one.
func TestMTUOfNAD(t *testing.T) {
	for conf, want := range map[string][2]int{
		`{"type":"bridge","bridge":"br100","ipam":{}}`:            {1500, 0},
		`{"type":"bridge","bridge":"br100","mtu":9000,"ipam":{}}`: {9000, 1},
	} {
		mtu, declared, err := mtuOfNAD(conf)
		if err != nil || mtu != want[0] || declared != (want[1] == 1) {
			t.Errorf("%s: %d, declared %v, %v", conf, mtu, declared, err)
		}
	}
	if _, _, err := mtuOfNAD("not json"); err == nil {
		t.Error("a NAD that is not JSON gave an MTU")
	}
}
