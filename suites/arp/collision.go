package arp

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/cozystack/vlan-conformance/framework/nodenet"
	"github.com/cozystack/vlan-conformance/framework/platform"
)

// fdbSample is where one bridge had a MAC right after one guest spoke.
type fdbSample struct {
	at      time.Time
	speaker string // the guest that had just transmitted
	port    string // "" when the bridge did not know the MAC
}

// portOf reads which port of the node's bridge a MAC sits behind.
func portOf(ctx context.Context, n platform.Node, mac net.HardwareAddr) (string, error) {
	fdb, err := nodenet.BridgeFDB(ctx, n)
	if err != nil {
		return "", err
	}
	for _, e := range fdb {
		if !e.Local && bytes.Equal(e.MAC, mac) {
			return e.Port, nil
		}
	}
	return "", nil
}

// flaps counts how often the MAC moved from one port to another, and the
// ports it was seen behind. A MAC held by one station never moves while
// that station stays put; one that moves back and forth has two owners.
func flaps(samples []fdbSample) (moves int, ports []string) {
	seen := map[string]bool{}
	last := ""
	for _, s := range samples {
		if s.port == "" {
			continue
		}
		if !seen[s.port] {
			seen[s.port] = true
			ports = append(ports, s.port)
		}
		if last != "" && s.port != last {
			moves++
		}
		last = s.port
	}
	return moves, ports
}

func describeSamples(samples []fdbSample, origin time.Time) string {
	var b strings.Builder
	b.WriteString("| t (ms) | transmitted | port of the MAC on br100 |\n|---:|---|---|\n")
	for _, s := range samples {
		port := s.port
		if port == "" {
			port = "(not learned)"
		}
		fmt.Fprintf(&b, "| %+d | %s | %s |\n", s.at.Sub(origin).Milliseconds(), s.speaker, port)
	}
	return b.String()
}
