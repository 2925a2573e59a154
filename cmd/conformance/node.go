package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/fabric"
	"github.com/cozystack/vlan-conformance/framework/nodenet"
	"github.com/cozystack/vlan-conformance/framework/probe"
)

// node is the node agent's side of the suite: run in the agent's pod on
// a node (hostNetwork, so its namespace is the node's), it makes the
// observations the suite cannot make from outside an existing cluster.
//
//	conformance node wait                        the pod's main process: wait for SIGTERM
//	conformance node observe WHAT [--iface=LINK] [--to=ADDR]  one observation of this namespace, as JSON
//	conformance node observe '{"what":...}'      the same, asked by the suite (nodenet.Observation)
//	conformance node capture --iface=LINK        frames crossing LINK until stdin ends, as pcap
//	conformance node serve --addr=ADDR           a TCP service on ADDR until stdin ends; each peer accepted
func node(stdin io.Reader, stdout, stderr io.Writer, args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, nodeUsage)
		return config.ExitBadInput
	}
	switch args[0] {
	case "wait":
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		<-ctx.Done()
		return 0
	case "observe":
		fs := flag.NewFlagSet("node observe", flag.ContinueOnError)
		fs.SetOutput(stderr)
		iface := fs.String("iface", "", "driver: the link whose driver to read")
		to := fs.String("to", "", "ping: the IPv4 address to ping (3 echo requests, 200 ms apart)")
		if len(args) < 2 || fs.Parse(args[2:]) != nil || fs.NArg() != 0 {
			fmt.Fprintln(stderr, nodeUsage)
			return config.ExitBadInput
		}
		o := nodenet.Observation{What: args[1], Iface: *iface}
		// The suite hands its request over whole, as JSON: a ping's options.
		if strings.HasPrefix(args[1], "{") {
			if err := json.Unmarshal([]byte(args[1]), &o); err != nil {
				fmt.Fprintln(stderr, "request:", err)
				return config.ExitBadInput
			}
		}
		if *to != "" {
			a, err := netip.ParseAddr(*to)
			if err != nil {
				fmt.Fprintln(stderr, "--to:", err)
				return config.ExitBadInput
			}
			opts := probe.NewPingOptions()
			o.To, o.Ping = a, &opts
		}
		return observe(stdout, stderr, o)
	case "capture":
		fs := flag.NewFlagSet("node capture", flag.ContinueOnError)
		fs.SetOutput(stderr)
		iface := fs.String("iface", "", "the link to capture on")
		bound := fs.Duration("for", 15*time.Minute, "stop by itself after this long (a suite that vanished without closing stdin)")
		if fs.Parse(args[1:]) != nil || fs.NArg() != 0 || *iface == "" || *bound <= 0 {
			fmt.Fprintln(stderr, nodeUsage)
			return config.ExitBadInput
		}
		return capture(stdin, stdout, stderr, *iface, *bound)
	case "serve":
		fs := flag.NewFlagSet("node serve", flag.ContinueOnError)
		fs.SetOutput(stderr)
		addr := fs.String("addr", "", "the node's address to offer a TCP service on (a free port)")
		bound := fs.Duration("for", 15*time.Minute, "stop by itself after this long (a suite that vanished without closing stdin)")
		if fs.Parse(args[1:]) != nil || fs.NArg() != 0 {
			fmt.Fprintln(stderr, nodeUsage)
			return config.ExitBadInput
		}
		a, err := netip.ParseAddr(*addr)
		if err != nil {
			fmt.Fprintln(stderr, "--addr:", err)
			return config.ExitBadInput
		}
		return serve(stdin, stdout, stderr, a, *bound)
	}
	fmt.Fprintln(stderr, nodeUsage)
	return config.ExitBadInput
}

var nodeUsage = "usage: conformance node wait | conformance node observe {" + strings.Join(nodenet.Observations(), "|") + "} [--iface=LINK] [--to=ADDR] | conformance node capture --iface=LINK [--for=15m] | conformance node serve --addr=ADDR [--for=15m]"

// serve offers a TCP service on addr in this namespace, the suite's own
// (probe.Serve), until stdin ends or bound passes: it says where on
// stderr, then prints each peer it accepts on stdout as it does.
func serve(stdin io.Reader, stdout, stderr io.Writer, addr netip.Addr, bound time.Duration) int {
	svc, err := probe.Serve("", addr)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer svc.Close()
	fmt.Fprintln(stderr, nodenet.Serving+svc.Addr().String())
	ended := make(chan struct{})
	go func() { io.Copy(io.Discard, stdin); close(ended) }()
	stop := time.After(bound)
	told := 0
	for {
		for _, peer := range svc.Accepted()[told:] {
			fmt.Fprintln(stdout, peer)
			told++
		}
		select {
		case <-ended:
			return 0
		case <-stop:
			return 0
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// capture records the frames crossing iface in this namespace, with the
// suite's own capture (evidence.StartCapture), until stdin ends or bound
// passes, then writes them to stdout as pcap.
func capture(stdin io.Reader, stdout, stderr io.Writer, iface string, bound time.Duration) int {
	c, err := evidence.StartCapture(evidence.Point{Iface: iface}, "")
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	fmt.Fprintln(stderr, nodenet.Capturing+iface)
	ended := make(chan struct{})
	go func() { io.Copy(io.Discard, stdin); close(ended) }()
	select {
	case <-ended:
	case <-time.After(bound):
	}
	frames, err := c.Stop()
	if err == nil {
		err = frames.Pcap(stdout)
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

// observe makes o in this process's network namespace and prints it.
func observe(stdout, stderr io.Writer, o nodenet.Observation) int {
	h, err := netlink.NewHandle()
	if err != nil {
		fmt.Fprintln(stderr, "netlink:", err)
		return 1
	}
	defer h.Close()
	v, err := nodenet.Observe(context.Background(), &fabric.NodeNetns{Handle: h}, o)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if err := json.NewEncoder(stdout).Encode(v); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}
