package datapath

import (
	"encoding/json"
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/fabric"
	"github.com/cozystack/vlan-conformance/framework/failures"
	"github.com/cozystack/vlan-conformance/framework/nodenet"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/run"
	"github.com/cozystack/vlan-conformance/framework/subject"
	"github.com/cozystack/vlan-conformance/suites/framework"
	"github.com/cozystack/vlan-conformance/suites/labels"
	"github.com/cozystack/vlan-conformance/suites/skip"
)

// vethDefaultMTU is what the bridge plugin gives a pod's veth when the NAD
// sets no mtu: it asks for none, and the kernel makes a veth 1500 bytes.
const vethDefaultMTU = 1500

// The node's provisioning, step 1 of the guide, read off each bridge node
// by netlink; no guest:
//
//	mgmt (default route)        the node's management interface (a kind node's eth0)
//	uplink ── uplink.100 ── br100 203.0.113.2/24 ── pods' veths (the NAD's MTU)
//	          VLAN 100, no address
func step1Specs(r *run.Run) {
	Describe("A node provisioned as step 1 says", labels.Datapath, func() {
		f := framework.New(r, "step1")
		var p platform.Platform

		BeforeEach(func(ctx SpecContext) {
			var err error
			p, err = f.Platform(ctx)
			Expect(err).NotTo(HaveOccurred(), "building the platform")
		})

		// "Create a bridge that enslaves the tagged VLAN sub-interface. The VLAN sub-interface itself carries no address."
		It("[NODE-01] has br100 enslave uplink.100, which carries the VLAN id and no address", labels.Claim("NODE-01"), func(ctx SpecContext) {
			skip.IfUntagged(p, "NODE-01")
			vlan := p.Config().VLAN
			for _, node := range p.BridgeNodes() {
				links, err := nodenet.Links(ctx, node)
				skip.IfNotObservable(err)
				Expect(err).NotTo(HaveOccurred())
				br, ok := links[fabric.BridgeName]
				Expect(ok).To(BeTrue(), "node %s must have %s", node.Name(), fabric.BridgeName)
				Expect(br.Kind).To(Equal("bridge"), "%s on %s must be a bridge", br.Name, node.Name())
				subs := portsOf(links, br.Name, "vlan")
				f.Note("node %s: %s's ports %s; its VLAN sub-interfaces %s", node.Name(), br.Name, describeLinks(portsOf(links, br.Name, "")), describeLinks(subs))
				Expect(subs).To(HaveLen(1), "%s on %s must enslave exactly one VLAN sub-interface", br.Name, node.Name())
				sub := subs[0]
				Expect(sub.VLANID).To(Equal(vlan), "%s on %s must carry VLAN %d", sub.Name, node.Name(), vlan)
				Expect(sub.Parent).NotTo(BeEmpty(), "%s on %s must sit on the node's uplink", sub.Name, node.Name())
				// The uplink's NIC, as a vendor's product file names it (ethtool -i).
				if drv, err := nodenet.Driver(ctx, node, sub.Parent); err == nil {
					f.Note("node %s: uplink %s: %s", node.Name(), sub.Parent, drv)
				} else {
					f.Note("node %s: uplink %s: no driver information: %v", node.Name(), sub.Parent, err)
				}
				Expect(sub.Addrs).To(BeEmpty(), "on %s "+failures.SubinterfaceCarriesNoAddress+": %s has %v", node.Name(), sub.Name, sub.Addrs)
			}
		})

		// "The node's default route must stay on the management interface. The bridge address (if any) is only for on-VLAN reachability, not a second default gateway."
		It("[NODE-02] keeps the node's default route on its management interface, off br100", labels.Claim("NODE-02"), func(ctx SpecContext) {
			for _, node := range p.BridgeNodes() {
				links, err := nodenet.Links(ctx, node)
				skip.IfNotObservable(err)
				Expect(err).NotTo(HaveOccurred())
				routes, err := nodenet.Routes(ctx, node)
				Expect(err).NotTo(HaveOccurred())
				var defaults []evidence.Route
				for _, rt := range routes {
					if rt.Dst == "default" {
						defaults = append(defaults, rt)
					}
				}
				f.Note("node %s: default routes %s", node.Name(), describeRoutes(defaults))
				Expect(defaults).NotTo(BeEmpty(), "node %s must have a default route, on its management interface", node.Name())
				vlanSide := onTheVLAN(links)
				for _, rt := range defaults {
					Expect(vlanSide).NotTo(HaveKey(rt.Dev), "on %s "+failures.DefaultRouteOffBridge+": one leaves by %s (%s)", node.Name(), rt.Dev, describeRoutes(defaults))
				}
			}
		})

		// Seed 003: "Ensure your NetworkAttachmentDefinition specifies the correct MTU matching the physical switch port."
		It("[NODE-03] never lets an MTU grow along the path: uplink ≥ uplink.100 ≥ br100 ≥ the NAD's", labels.Claim("NODE-03"), func(ctx SpecContext) {
			nadMTU, declared, err := mtuOfNAD(f.Subject().NADConfig(subject.GuideNADFixture))
			Expect(err).NotTo(HaveOccurred(), "reading the guide's NAD")
			nad := fmt.Sprintf("the NAD's %d", nadMTU)
			if !declared {
				nad = fmt.Sprintf("the NAD's (none set: the bridge plugin's veth, %d)", nadMTU)
			}
			for _, node := range p.BridgeNodes() {
				links, err := nodenet.Links(ctx, node)
				skip.IfNotObservable(err)
				Expect(err).NotTo(HaveOccurred())
				chain, err := pathOf(links)
				Expect(err).NotTo(HaveOccurred(), "node %s", node.Name())
				chain = append(chain, hop{name: nad, mtu: nadMTU})
				f.Note("node %s: %s", node.Name(), describeChain(chain))
				for i := 1; i < len(chain); i++ {
					Expect(chain[i].mtu).To(BeNumerically("<=", chain[i-1].mtu), "on %s %s (%d) "+failures.MTUsNeverGrow+", %s (%d): %s",
						node.Name(), chain[i].name, chain[i].mtu, chain[i-1].name, chain[i-1].mtu, describeChain(chain))
				}
			}
		})
	})
}

// portsOf are the ports of bridge br of that kind ("" for every kind).
func portsOf(links map[string]evidence.Link, br, kind string) []evidence.Link {
	var out []evidence.Link
	for _, l := range links {
		if l.Master == br && (kind == "" || l.Kind == kind) {
			out = append(out, l)
		}
	}
	return out
}

// onTheVLAN are the links step 1 puts on the VLAN: br100, its ports, and
// the links they sit on.
func onTheVLAN(links map[string]evidence.Link) map[string]bool {
	out := map[string]bool{fabric.BridgeName: true}
	for _, l := range portsOf(links, fabric.BridgeName, "") {
		out[l.Name] = true
		if l.Parent != "" {
			out[l.Parent] = true
		}
	}
	return out
}

// hop is one link of the path from the wire to a pod.
type hop struct {
	name string
	mtu  int
}

// pathOf is step 1's path on a node: the uplink, the VLAN sub-interface
// br100 enslaves (on an untagged trunk the uplink is both), br100.
func pathOf(links map[string]evidence.Link) ([]hop, error) {
	br, ok := links[fabric.BridgeName]
	if !ok {
		return nil, fmt.Errorf("no %s", fabric.BridgeName)
	}
	var chain []hop
	for _, sub := range portsOf(links, br.Name, "") {
		if sub.Kind != "vlan" && sub.Name != fabric.UplinkName {
			continue // a pod's veth: the NAD's end of the path
		}
		if up, ok := links[sub.Parent]; ok {
			chain = append(chain, hop{up.Name, up.MTU})
		}
		chain = append(chain, hop{sub.Name, sub.MTU})
	}
	if len(chain) == 0 {
		return nil, fmt.Errorf("%s enslaves neither a VLAN sub-interface nor the uplink", br.Name)
	}
	return append(chain, hop{br.Name, br.MTU}), nil
}

// mtuOfNAD is the MTU a NAD's pods get: the one it declares, or the
// bridge plugin's veth default.
func mtuOfNAD(conf string) (mtu int, declared bool, err error) {
	var nad struct {
		MTU int `json:"mtu"`
	}
	if err := json.Unmarshal([]byte(conf), &nad); err != nil {
		return 0, false, err
	}
	if nad.MTU == 0 {
		return vethDefaultMTU, false, nil
	}
	return nad.MTU, true, nil
}

func describeLinks(ls []evidence.Link) string {
	var parts []string
	for _, l := range ls {
		s := fmt.Sprintf("%s (%s, MTU %d", l.Name, l.Kind, l.MTU)
		if l.VLANID != 0 {
			s += fmt.Sprintf(", VLAN %d on %s", l.VLANID, l.Parent)
		}
		if len(l.Addrs) > 0 {
			s += fmt.Sprintf(", addresses %v", l.Addrs)
		}
		parts = append(parts, s+")")
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func describeRoutes(rs []evidence.Route) string {
	var parts []string
	for _, r := range rs {
		s := r.Dst + " dev " + r.Dev
		if r.Via.IsValid() {
			s = r.Dst + " via " + r.Via.String() + " dev " + r.Dev
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}

func describeChain(chain []hop) string {
	var parts []string
	for _, h := range chain {
		parts = append(parts, fmt.Sprintf("%s %d", h.name, h.mtu))
	}
	return strings.Join(parts, " ≥ ")
}
