// The conformance suite's entry point: one test binary (`go test -c` or
// `ginkgo build`) that a vendor can copy to a node and run with flags.
package suites

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/fabric"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster"
	"github.com/cozystack/vlan-conformance/framework/platform/lab"
	"github.com/cozystack/vlan-conformance/framework/stager"

	_ "github.com/cozystack/vlan-conformance/suites/arp"
	_ "github.com/cozystack/vlan-conformance/suites/cluster"
	_ "github.com/cozystack/vlan-conformance/suites/datapath"
	_ "github.com/cozystack/vlan-conformance/suites/stager"
)

var cfg = config.Register(flag.CommandLine)

func TestMain(m *testing.M) {
	flag.Parse()
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(os.Stderr, "conformance: invalid input, nothing was created:\n%v\n", err)
		os.Exit(config.ExitBadInput)
	}
	os.Exit(m.Run())
}

func TestConformance(t *testing.T) {
	RegisterFailHandler(Fail)
	// One run at a time on this machine, unless the driver that started
	// this binary holds the lock for it (fabric.LockFile says why).
	lock, err := fabric.Exclusive(os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	evidence.ReportDir = cfg.ReportDir
	platform.Configure(cfg, func(ctx context.Context) (platform.Platform, error) {
		switch cfg.Tier {
		case "lab":
			l, err := lab.New(ctx, cfg)
			if err != nil {
				return nil, err
			}
			return l, nil
		case "cluster":
			c, err := cluster.New(ctx, cfg)
			if err != nil {
				return nil, err
			}
			return c, nil
		default:
			return nil, fmt.Errorf("tier %q is not built into this binary yet", cfg.Tier)
		}
	})
	suiteConfig, reporterConfig := GinkgoConfiguration()
	if reporterConfig.JUnitReport == "" {
		reporterConfig.JUnitReport = filepath.Join(cfg.ReportDir, "junit.xml")
	}
	defer stager.DropImageCache() // the stager labs' unpacked --stager-image
	RunSpecs(t, "KubeVirt external VLAN conformance", suiteConfig, reporterConfig)
}

var _ = AfterSuite(func(ctx SpecContext) {
	Expect(platform.Shutdown(ctx)).To(Succeed(), "removing everything the platform created")
})

var slug = regexp.MustCompile(`[^A-Za-z0-9]+`)

// A failed spec leaves the state of every namespace next to its evidence.
var _ = JustAfterEach(func(ctx SpecContext) {
	report := CurrentSpecReport()
	if !report.Failed() || !cfg.DumpOnFailure {
		return
	}
	// Dump only a platform that exists (a stager spec needs none).
	p, ok := platform.Built()
	if !ok {
		return
	}
	name := strings.Trim(slug.ReplaceAllString(report.LeafNodeText, "-"), "-")
	if len(name) > 60 {
		name = name[:60]
	}
	dir := filepath.Dir(evidence.ArtifactPath(evidence.ClaimOf(report.FullText()), "x"))
	dir = filepath.Join(dir, "failure-"+name)
	if err := p.Dump(ctx, dir); err != nil {
		AddReportEntry("dump failed", err.Error())
		return
	}
	AddReportEntry("artifacts", dir)
})
