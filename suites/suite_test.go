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
	"time"

	. "github.com/onsi/ginkgo/v2"
	"github.com/onsi/ginkgo/v2/types"
	. "github.com/onsi/gomega"

	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/evidence"
	"github.com/cozystack/vlan-conformance/framework/fabric"
	"github.com/cozystack/vlan-conformance/framework/platform"
	clustertier "github.com/cozystack/vlan-conformance/framework/platform/cluster"
	"github.com/cozystack/vlan-conformance/framework/platform/lab"
	"github.com/cozystack/vlan-conformance/framework/run"
	stagerlib "github.com/cozystack/vlan-conformance/framework/stager"
	"github.com/cozystack/vlan-conformance/framework/subject"

	"github.com/cozystack/vlan-conformance/suites/arp"
	"github.com/cozystack/vlan-conformance/suites/datapath"
	"github.com/cozystack/vlan-conformance/suites/framework"
	"github.com/cozystack/vlan-conformance/suites/labels"
	"github.com/cozystack/vlan-conformance/suites/release"
	"github.com/cozystack/vlan-conformance/suites/stager"
)

var (
	cfg  = config.Register(flag.CommandLine)
	subj *subject.Subject // the release --cozystack names (TestMain); nil without
)

func TestMain(m *testing.M) {
	flag.Parse()
	err := cfg.Validate()
	if err == nil {
		subj, err = subject.Of(cfg)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "conformance: invalid input, nothing was created:\n%v\n", err)
		os.Exit(config.ExitBadInput)
	}
	if err := subj.Prepare(cfg); err != nil {
		fmt.Fprintf(os.Stderr, "conformance: %v\n", err)
		os.Exit(1)
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
	r, err := run.New(cfg, subj, build)
	if err != nil {
		t.Fatal(err)
	}
	// The spec tree, built now in this order: a tenant's addresses follow
	// from its place in it, whatever order the specs then run in.
	arp.Specs(r)
	stager.Specs(r)
	datapath.Specs(r)
	release.Specs(r)
	hooks(r)
	suiteConfig, reporterConfig := GinkgoConfiguration()
	if !subj.Stages() {
		// The report says why these claims are not made (report.ForRelease).
		suiteConfig.LabelFilter = labels.WithoutStaging(suiteConfig.LabelFilter)
	}
	// A vendor's gateway may keep its stale entry for hours: ARP-03 and
	// ARP-07's three restarts each wait up to --gateway-wait for it, so
	// the suite's deadline grows with it, by the waits the run selects,
	// unless --ginkgo.timeout is given.
	if extra := cfg.GatewayWait - config.DefaultGatewayWait; extra > 0 && !flagGiven("ginkgo.timeout") {
		suiteConfig.Timeout += time.Duration(arp.GatewayWaits()) * extra
	}
	if reporterConfig.JUnitReport == "" {
		reporterConfig.JUnitReport = filepath.Join(cfg.ReportDir, "junit.xml")
	}
	defer stagerlib.DropImageCache() // the stager harnesses' unpacked --stager-image
	RunSpecs(t, "KubeVirt external VLAN conformance", suiteConfig, reporterConfig)
}

// flagGiven tells whether the command line set the flag name.
func flagGiven(name string) (given bool) {
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// build makes the platform of cfg's tier.
func build(ctx context.Context) (platform.Platform, error) {
	switch cfg.Tier {
	case "lab":
		l, err := lab.New(ctx, cfg, subj)
		if err != nil {
			return nil, err
		}
		return l, nil
	case "cluster":
		c, err := clustertier.New(ctx, cfg, subj)
		if err != nil {
			return nil, err
		}
		return c, nil
	default:
		return nil, fmt.Errorf("tier %q is not built into this binary yet", cfg.Tier)
	}
}

var slug = regexp.MustCompile(`[^A-Za-z0-9]+`)

// hooks builds the platform before the suite and removes it after, and
// leaves the state of every namespace next to a failed spec's evidence.
func hooks(r *run.Run) {
	// A cluster is made once for the run, before any spec; a platform that
	// builds lazily (the lab) is left alone.
	SynchronizedBeforeSuite(func(ctx SpecContext) {
		Expect(r.Provision(ctx)).To(Succeed(), "building the cluster for the run")
		// The VMs containers registered to boot ahead start booting now,
		// behind the first containers' specs.
		if p, ok := r.Built(); ok {
			framework.StartPrestarts(ctx, p)
		}
	}, func(SpecContext) {})
	AfterSuite(func(ctx SpecContext) {
		Expect(framework.StopPrestarts(ctx)).To(Succeed(), "deleting the VMs booted ahead that no spec took")
		Expect(r.Shutdown(ctx)).To(Succeed(), "removing everything the platform created")
	})
	// When each spec ran goes on the platform's timeline, beside its boots
	// (bench-cluster.md: what the lane waited for).
	ReportAfterEach(func(rep SpecReport) {
		p, ok := r.Built()
		if !ok || rep.State.Is(types.SpecStateSkipped|types.SpecStatePending) {
			return
		}
		if t, ok := platform.As[platform.Timed](p); ok {
			container := rep.LeafNodeType.String()
			if len(rep.ContainerHierarchyTexts) > 0 {
				container = rep.ContainerHierarchyTexts[0]
			}
			t.SpecRan(container, rep.LeafNodeText, rep.StartTime, rep.EndTime)
		}
	})
	JustAfterEach(func(ctx SpecContext) {
		report := CurrentSpecReport()
		if !report.Failed() || !cfg.DumpOnFailure {
			return
		}
		// Ctrl-C is no verdict, and its grace period is for removing what
		// the run made, not for collecting every VM's logs.
		if report.State == types.SpecStateInterrupted {
			AddReportEntry("artifacts", "none: the run was interrupted")
			return
		}
		// Dump only a platform that exists (a stager spec needs none).
		p, ok := r.Built()
		if !ok {
			return
		}
		name := strings.Trim(slug.ReplaceAllString(report.LeafNodeText, "-"), "-")
		if len(name) > 60 {
			name = name[:60]
		}
		dir := r.Artifacts().Path(evidence.ClaimOf(report.FullText()), "failure-"+name)
		if err := p.Dump(ctx, dir); err != nil {
			AddReportEntry("dump failed", err.Error())
			return
		}
		AddReportEntry("artifacts", dir)
	})
}
