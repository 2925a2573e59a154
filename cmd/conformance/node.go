package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/vishvananda/netlink"

	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/fabric"
	"github.com/cozystack/vlan-conformance/framework/nodenet"
)

// node is the node agent's side of the suite: run in the agent's pod on
// a node (hostNetwork, so its namespace is the node's), it makes the
// observations the suite cannot make from outside an existing cluster.
//
//	conformance node wait                        the pod's main process: wait for SIGTERM
//	conformance node observe WHAT [--iface=LINK] one observation of this namespace, as JSON
func node(stdout, stderr io.Writer, args []string) int {
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
		if len(args) < 2 || fs.Parse(args[2:]) != nil || fs.NArg() != 0 {
			fmt.Fprintln(stderr, nodeUsage)
			return config.ExitBadInput
		}
		return observe(stdout, stderr, nodenet.Observation{What: args[1], Iface: *iface})
	}
	fmt.Fprintln(stderr, nodeUsage)
	return config.ExitBadInput
}

var nodeUsage = "usage: conformance node wait | conformance node observe {" + strings.Join(nodenet.Observations(), "|") + "} [--iface=LINK]"

// observe makes o in this process's network namespace and prints it.
func observe(stdout, stderr io.Writer, o nodenet.Observation) int {
	h, err := netlink.NewHandle()
	if err != nil {
		fmt.Fprintln(stderr, "netlink:", err)
		return 1
	}
	defer h.Close()
	v, err := nodenet.Observe(&fabric.NodeNetns{Handle: h}, o)
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
