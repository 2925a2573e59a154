package guestnet

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
	"github.com/cozystack/vlan-conformance/framework/probe"
)

// What a guest's shell prints, read back: iproute2's one-line forms,
// iputils ping's summary.

func parseAddrs(out string) []netip.Prefix {
	var ps []netip.Prefix
	for _, m := range regexp.MustCompile(`\sinet\s+(\S+)`).FindAllStringSubmatch(out, -1) {
		if p, err := netip.ParsePrefix(m[1]); err == nil {
			ps = append(ps, p)
		}
	}
	return ps
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

// arpTool is a small ARP prober and announcer for a guest's shell (its
// image has python3, not necessarily arping): `probe IFACE SRC TARGET
// TIMEOUT` prints the MAC that answered (exit 3: no reply), `garp IFACE
// IP` sends a gratuitous ARP, `spoof IFACE MAC SRC TARGET` a request from
// another MAC.
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

const arpToolPath = "/run/vcf-arp.py"

// InstallTools writes the ARP tool into a guest's shell, once per boot
// (the guest's /run is a tmpfs): typed on each call it would add a
// kilobyte to every probe on a serial console.
func InstallTools(ctx context.Context, g platform.Guest) error {
	in, err := way(g)
	if err != nil || in.Shell == nil {
		return err
	}
	_, err = must(ctx, g, in.Shell, "echo "+base64.StdEncoding.EncodeToString([]byte(arpTool))+" | base64 -d > "+arpToolPath)
	return err
}
