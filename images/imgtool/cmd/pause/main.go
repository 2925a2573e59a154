// Command pause is the pod sandbox's init process: it holds the pod's
// namespaces open, reaps the zombies re-parented to it and exits on
// SIGINT/SIGTERM, like the upstream registry.k8s.io/pause. Pure Go and static
// so it builds from the Go module proxy alone.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// version is set with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		fmt.Println("pause.go version " + version)
		return
	}
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "Warning: pause should be the first process")
	}
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s == syscall.SIGCHLD {
			reap()
			continue
		}
		fmt.Fprintf(os.Stderr, "Shutting down, got signal: %v\n", s)
		os.Exit(0)
	}
}

// reap collects every exited child; SIGCHLD coalesces, so loop until none.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if pid <= 0 || err != nil {
			return
		}
	}
}
