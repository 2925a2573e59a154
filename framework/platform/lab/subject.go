package lab

import (
	"encoding/json"
	"strings"

	"github.com/cozystack/vlan-conformance/fixtures"
	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/fabric"
)

// subject is what the lab builds for a run: the guide's setup, or the
// deliberately broken variant a negative control names. This is the only
// place controls turn into topology, NAD or cloud-init changes.
type subject struct {
	bridgeWiring  fabric.Wiring
	macvlanWiring fabric.Wiring
	mtu           int
	nadConfig     func(string) string
	cloudInit     func(string) string
	keepPlugins   bool // WithoutPlugin does nothing
}

func subjectFor(cfg *config.Config) subject {
	s := subject{
		bridgeWiring: fabric.GuideBridge, macvlanWiring: fabric.MacvlanParent, mtu: 1500,
		nadConfig: same, cloudInit: same,
	}
	switch cfg.Control {
	case config.CtlNoSubinterface:
		s.bridgeWiring = fabric.NoSubinterface
	case config.CtlWrongVLAN:
		s.bridgeWiring = fabric.WrongVLAN
	case config.CtlUntagged:
		s.bridgeWiring = fabric.UntaggedUplink
	case config.CtlAddrOnSubinterface:
		s.bridgeWiring = fabric.AddrOnSubinterface
	case config.CtlBothVLANsOneBridge:
		s.bridgeWiring = fabric.BothVLANs
	case config.CtlMacvlanAsBridge:
		s.macvlanWiring = fabric.GuideBridge
		s.nadConfig = func(conf string) string {
			if strings.Contains(conf, `"macvlan"`) {
				return fixtures.NAD("vlan100-bridge")
			}
			return conf
		}
	case config.CtlJumboPath:
		s.mtu = 9000
	case config.CtlNodeHasBridge:
		s.keepPlugins = true
	case config.CtlMacvlanPassthru:
		s.nadConfig = setKey("macvlan", "mode", "passthru")
	case config.CtlHostLocalIPAM:
		s.nadConfig = setKey("bridge", "ipam", map[string]any{
			"type": "host-local", "subnet": cfg.Subnet, "rangeStart": "203.0.113.100", "rangeEnd": "203.0.113.120",
			"dataDir": "/run/vcf-host-local",
		})
	case config.CtlDefaultRouteOnVLAN:
		s.cloudInit = func(ud string) string {
			// One more line under the VLAN NIC: a default route via the gateway.
			return strings.Replace(ud, "            addresses:", "            routes:\n              - to: default\n                via: "+cfg.Gateway+"\n            addresses:", 1)
		}
	}
	return s
}

func same(s string) string { return s }

// setKey sets a top-level key of NAD configs of one plugin type.
func setKey(pluginType, key string, value any) func(string) string {
	return func(conf string) string {
		m := map[string]any{}
		if json.Unmarshal([]byte(conf), &m) != nil || m["type"] != pluginType {
			return conf
		}
		m[key] = value
		b, _ := json.Marshal(m)
		return string(b)
	}
}
