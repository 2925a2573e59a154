// Command labvm-smoke boots the lab VM by hand and runs one command in it.
//
//	labvm-smoke [-cache DIR] [-workdir DIR] [-prepare] [-- /abs/cmd args...]
//
// -prepare only fetches the kernel and builds the initramfs. Its exit code is
// the command's (or 125 when the VM itself failed).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/labvm"
)

func main() {
	wd, _ := os.Getwd()
	cache := flag.String("cache", filepath.Join(config.CacheRoot(), "labvm"), "cache directory")
	work := flag.String("workdir", wd, "directory shared read-write at the same path")
	mem := flag.Int("mem", 1024, "guest memory in MiB")
	prepare := flag.Bool("prepare", false, "only fetch the kernel and build the initramfs")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cacheDir, _ := filepath.Abs(*cache)
	workDir, _ := filepath.Abs(*work)
	cfg := labvm.Config{
		CacheDir: cacheDir, WorkDir: workDir, MemoryMB: *mem,
		Command: flag.Args(),
		Stdout:  os.Stdout, Stderr: os.Stderr, Progress: os.Stderr,
	}
	if *prepare {
		k, err := labvm.EnsureKernel(ctx, cfg)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Printf("%s %s %s\n", k.Package, k.Release, k.Vmlinux)
		return
	}
	if len(cfg.Command) == 0 {
		cfg.Command = []string{"/bin/sh", "-c", "uname -r; ip -br link; cat /proc/mounts"}
	}
	rc, err := labvm.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(125)
	}
	os.Exit(rc)
}
