package stager

// Standalone entry for the stager specs alone (the suite's main in suites/
// is the real one): go test ./suites/stager -args --stager-manifest=...
// Flags are the suite's (framework/config); relative paths are taken from
// the repository root.

import (
	"context"
	"errors"
	"flag"
	"os"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/platform"
)

var cfg = config.Register(flag.CommandLine)

func TestStager(t *testing.T) {
	if err := os.Chdir("../.."); err != nil {
		t.Fatal(err)
	}
	if cfg.Control != "" {
		for _, c := range config.Controls() {
			if c.ID == cfg.Control {
				if err := flag.CommandLine.Parse(c.ExtraArgs); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	platform.Configure(cfg, func(context.Context) (platform.Platform, error) {
		return nil, errors.New("standalone stager run: no network platform")
	})
	RegisterFailHandler(Fail)
	RunSpecs(t, "stager")
}
