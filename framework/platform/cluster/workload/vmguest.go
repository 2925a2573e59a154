package workload

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/console"
	"github.com/cozystack/vlan-conformance/framework/probe"
)

// vmGuest is a KubeVirt VM seen through its serial console. Its VLAN NIC is
// the one whose MAC the VMI status gives for the NAD's network, found in
// the guest by that MAC, never by name.
type vmGuest struct {
	spec       platform.VMSpec
	node       platform.Node
	vmName     string
	status     platform.VMStatus
	vlanIface  string
	podIface   string // the launcher pod's interface for the NAD
	launcher   string // the launcher pod's UID
	con        *console.Console
	serialLog  string // path of the raw serial log
	attachment platform.Attachment
	ownCluster bool // the suite built the cluster: its nodes' netns are the suite's to see
}

const cmdTimeout = 30 * time.Second

func (g *vmGuest) run(ctx context.Context, cmd string) (string, int, error) {
	return g.con.Run(ctx, cmd, cmdTimeout)
}

// must runs a command that has to succeed.
func (g *vmGuest) must(ctx context.Context, cmd string) (string, error) {
	out, code, err := g.run(ctx, cmd)
	if err != nil {
		return "", fmt.Errorf("guest %s: %w", g.spec.Name, err)
	}
	if code != 0 {
		return out, fmt.Errorf("guest %s: %q exited %d: %s", g.spec.Name, cmd, code, strings.TrimSpace(out))
	}
	return out, nil
}

func (g *vmGuest) Name() string                    { return g.spec.Name }
func (g *vmGuest) Node() platform.Node             { return g.node }
func (g *vmGuest) MAC() net.HardwareAddr           { return g.status.VLANMAC }
func (g *vmGuest) VLANInterface() string           { return g.vlanIface }
func (g *vmGuest) Attachment() platform.Attachment { return g.attachment }
func (g *vmGuest) Spec() platform.VMSpec           { return g.spec }

// VLANPoint is the launcher pod's tap for the VLAN NIC: it carries exactly
// the guest's frames, both ways, and the pod's netns is the host's to open
// (a kind node's processes are the host's). KubeVirt names the tap after
// the pod interface (GenerateTapDeviceName: "tap" + the name after "pod"
// or "net").
func (g *vmGuest) VLANPoint() evidence.Point {
	label := "guest " + g.spec.Name + " " + g.vlanIface + ", on its launcher's tap"
	ns, err := podNetns(g.launcher)
	if err != nil || len(g.podIface) < 4 {
		why := fmt.Errorf("launcher pod %q, pod interface %q: %v", g.launcher, g.podIface, err)
		if !g.ownCluster {
			why = fmt.Errorf("%w: %v", evidence.ErrNotObservable, why)
		}
		// On a cluster the suite built, the launcher's netns is a node's
		// and must be found: not finding it fails the spec.
		return evidence.Point{Label: label, Err: why}
	}
	return evidence.Point{Netns: ns, Iface: "tap" + g.podIface[3:], Label: label}
}

// ifaceByMAC finds the guest's interface name for mac in `ip -o link`.
func ifaceByMAC(ipLink string, mac net.HardwareAddr) (string, error) {
	re := regexp.MustCompile(`^\d+:\s+([^:@\s]+)[:@].*link/ether\s+([0-9a-f:]{17})`)
	for _, l := range strings.Split(ipLink, "\n") {
		if m := re.FindStringSubmatch(strings.TrimSpace(l)); m != nil && strings.EqualFold(m[2], mac.String()) {
			return m[1], nil
		}
	}
	return "", fmt.Errorf("no interface with MAC %s in the guest:\n%s", mac, ipLink)
}

func (g *vmGuest) Addresses(ctx context.Context, iface string) ([]netip.Prefix, error) {
	out, err := g.must(ctx, "ip -4 -o addr show dev "+iface)
	if err != nil {
		return nil, err
	}
	return parseAddrs(out), nil
}

func (g *vmGuest) LinkMAC(ctx context.Context, iface string) (net.HardwareAddr, error) {
	out, err := g.must(ctx, "cat /sys/class/net/"+iface+"/address")
	if err != nil {
		return nil, err
	}
	return net.ParseMAC(strings.TrimSpace(out))
}

func parseAddrs(out string) []netip.Prefix {
	var ps []netip.Prefix
	for _, m := range regexp.MustCompile(`\sinet\s+(\S+)`).FindAllStringSubmatch(out, -1) {
		if p, err := netip.ParsePrefix(m[1]); err == nil {
			ps = append(ps, p)
		}
	}
	return ps
}

func (g *vmGuest) MTU(ctx context.Context, iface string) (int, error) {
	out, err := g.must(ctx, "cat /sys/class/net/"+iface+"/mtu")
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(out))
}

func (g *vmGuest) Routes(ctx context.Context) ([]platform.Route, error) {
	out, err := g.must(ctx, "ip -4 route show table main")
	if err != nil {
		return nil, err
	}
	return parseRoutes(out)
}

// parseRoutes reads `ip -4 route show` lines.
func parseRoutes(out string) ([]platform.Route, error) {
	var rs []platform.Route
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		r := platform.Route{Scope: "universe"}
		if f[0] == "default" {
			r.Dst = netip.MustParsePrefix("0.0.0.0/0")
		} else {
			d := f[0]
			if !strings.Contains(d, "/") {
				d += "/32"
			}
			p, err := netip.ParsePrefix(d)
			if err != nil {
				return nil, fmt.Errorf("route %q: %w", l, err)
			}
			r.Dst = p
		}
		for i := 1; i+1 < len(f); i++ {
			switch f[i] {
			case "via":
				r.Gw, _ = netip.ParseAddr(f[i+1])
			case "dev":
				r.Iface = f[i+1]
			case "scope":
				r.Scope = f[i+1]
			}
		}
		rs = append(rs, r)
	}
	return rs, nil
}

func (g *vmGuest) Ping(ctx context.Context, dst netip.Addr, opts ...probe.PingOption) (probe.PingResult, error) {
	o := probe.NewPingOptions(opts...)
	cmd := fmt.Sprintf("ping -n -c %d -i %.3f -W %d -s %d", o.Count, o.Interval.Seconds(), max(1, int(o.Timeout.Seconds())), o.Size)
	if o.DontFrag {
		cmd += " -M do"
	}
	if o.Iface != "" {
		cmd += " -I " + o.Iface
	}
	out, code, err := g.run(ctx, cmd+" "+dst.String()+" 2>&1")
	if err != nil {
		return probe.PingResult{}, err
	}
	r, ran := parsePing(out)
	if !ran {
		// No summary: ping never got to send (a bad option, no route, no
		// binary). Its silence must not read as "dropped".
		return r, fmt.Errorf("guest %s: %s sent no echo request (exit %d): %s", g.spec.Name, cmd, code, strings.TrimSpace(out))
	}
	return r, nil
}

// Dial connects with bash's /dev/tcp (the guest image has bash, not
// necessarily nc): exit 0 is a connection, 124 timeout's cut, any other
// code bash's own complaint, which it prints.
func (g *vmGuest) Dial(ctx context.Context, dst netip.AddrPort, timeout time.Duration) (probe.DialResult, error) {
	d := probe.DialResult{Dst: dst}
	cmd := fmt.Sprintf("timeout %d bash -c 'exec 3<>/dev/tcp/%s/%d' 2>&1", max(1, int(timeout.Seconds())), dst.Addr(), dst.Port())
	start := time.Now()
	out, code, err := g.run(ctx, cmd)
	d.Took = time.Since(start)
	if err != nil {
		return d, fmt.Errorf("guest %s: %w", g.spec.Name, err)
	}
	out = strings.TrimSpace(out)
	switch code {
	case 0:
		d.Connected = true
	case 124:
		d.Err = fmt.Errorf("no connection within %s (timeout)", timeout)
	case 126, 127:
		return d, fmt.Errorf("guest %s: %s could not run (exit %d): %s", g.spec.Name, cmd, code, out)
	default:
		d.Err = fmt.Errorf("exit %d: %s", code, out)
	}
	return d, nil
}

// parsePing reads iputils ping's summary (and a local send error); ran is
// false when there is no summary, so nothing was sent.
func parsePing(out string) (r probe.PingResult, ran bool) {
	if m := regexp.MustCompile(`(\d+) packets transmitted, (\d+) (?:packets )?received`).FindStringSubmatch(out); m != nil {
		r.Sent, _ = strconv.Atoi(m[1])
		r.Received, _ = strconv.Atoi(m[2])
		ran = r.Sent > 0
	}
	if m := regexp.MustCompile(`(?m)^ping: (?:local error: |sendmsg: )?(.*(?:[Mm]essage too long|mtu=).*)$`).FindStringSubmatch(out); m != nil {
		r.Err = fmt.Errorf("ping: %s", m[1])
	}
	now := time.Now()
	for i := 0; i < r.Received; i++ {
		r.Replies = append(r.Replies, now)
	}
	return r, ran
}

func (g *vmGuest) Neighbor(ctx context.Context, ip netip.Addr) (evidence.Neighbor, error) {
	out, err := g.must(ctx, "ip -4 neigh show "+ip.String()+" dev "+g.vlanIface)
	if err != nil {
		return evidence.Neighbor{}, err
	}
	return parseNeigh(ip, out), nil
}

func parseNeigh(ip netip.Addr, out string) evidence.Neighbor {
	n := evidence.Neighbor{IP: ip}
	f := strings.Fields(out)
	for i := 0; i < len(f); i++ {
		if f[i] == "lladdr" && i+1 < len(f) {
			n.MAC, _ = net.ParseMAC(f[i+1])
		}
	}
	if len(f) > 0 {
		n.State = f[len(f)-1]
	}
	return n
}

// arpTool is a small ARP prober and announcer for the guest (its image has
// python3, not necessarily arping): `probe IFACE SRC TARGET TIMEOUT` prints
// the MAC that answered (exit 3: no reply), `garp IFACE IP` sends a
// gratuitous ARP, `spoof IFACE MAC SRC TARGET` a request from another MAC.
const arpTool = `import socket,struct,sys,time
m,i=sys.argv[1],sys.argv[2]
s=socket.socket(socket.AF_PACKET,socket.SOCK_RAW,socket.htons(0x0806));s.bind((i,0))
me=s.getsockname()[4];a=lambda x:socket.inet_aton(x)
if m=='spoof':me=bytes.fromhex(sys.argv.pop(3).replace(':',''))
def f(op,sip,tip,dst):return dst+me+b'\x08\x06'+struct.pack('!HHBBH',1,0x800,6,4,op)+me+a(sip)+b'\0'*6+a(tip)
if m=='garp':s.send(f(1,sys.argv[3],sys.argv[3],b'\xff'*6));sys.exit(0)
if m=='spoof':s.send(f(1,sys.argv[3],sys.argv[4],b'\xff'*6));sys.exit(0)
s.send(f(1,sys.argv[3],sys.argv[4],b'\xff'*6));end=time.time()+float(sys.argv[5]);s.settimeout(0.2)
while time.time()<end:
 try:p=s.recv(128)
 except socket.timeout:continue
 if p[20:22]==b'\0\2' and p[28:32]==a(sys.argv[4]):print(':'.join('%02x'%b for b in p[22:28]));sys.exit(0)
sys.exit(3)
`

func (g *vmGuest) installARPTool(ctx context.Context) error {
	_, err := g.must(ctx, "echo "+base64.StdEncoding.EncodeToString([]byte(arpTool))+" | base64 -d > /run/vcf-arp.py")
	return err
}

func (g *vmGuest) vlanAddr(ctx context.Context) (netip.Addr, error) {
	addrs, err := g.Addresses(ctx, g.vlanIface)
	if err != nil || len(addrs) == 0 {
		return netip.Addr{}, fmt.Errorf("guest %s has no address on %s (%v)", g.spec.Name, g.vlanIface, err)
	}
	return addrs[0].Addr(), nil
}

func (g *vmGuest) ARPProbe(ctx context.Context, ip netip.Addr, timeout time.Duration) (net.HardwareAddr, error) {
	src, err := g.vlanAddr(ctx)
	if err != nil {
		return nil, err
	}
	out, code, err := g.con.Run(ctx, fmt.Sprintf("python3 /run/vcf-arp.py probe %s %s %s %.1f", g.vlanIface, src, ip, timeout.Seconds()), timeout+cmdTimeout)
	if err != nil {
		return nil, err
	}
	switch code {
	case 0:
	case 3: // the tool's "nobody answered"; anything else is the tool failing
		return nil, fmt.Errorf("who-has %s on %s: %w within %s", ip, g.vlanIface, probe.ErrNoReply, timeout)
	default:
		return nil, fmt.Errorf("ARP probe for %s on %s: exit %d: %s", ip, g.vlanIface, code, strings.TrimSpace(out))
	}
	return net.ParseMAC(strings.TrimSpace(out))
}

func (g *vmGuest) AnnounceGARP(ctx context.Context) error {
	src, err := g.vlanAddr(ctx)
	if err != nil {
		return err
	}
	_, err = g.must(ctx, fmt.Sprintf("python3 /run/vcf-arp.py garp %s %s", g.vlanIface, src))
	return err
}

func (g *vmGuest) SpoofARP(ctx context.Context, src net.HardwareAddr, target netip.Addr) error {
	sender, err := g.vlanAddr(ctx)
	if err != nil {
		return err
	}
	_, err = g.must(ctx, fmt.Sprintf("python3 /run/vcf-arp.py spoof %s %s %s %s", g.vlanIface, src, sender, target))
	return err
}
