package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/image"
	"github.com/cozystack/vlan-conformance/framework/labvm"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/cabling"
	"github.com/cozystack/vlan-conformance/framework/report"
	"github.com/cozystack/vlan-conformance/framework/stager"
	"github.com/cozystack/vlan-conformance/framework/subject"
)

// The stager and release specs need root but no kernel options; the rest
// need the lab network. When the lab part runs in the VM, the native part
// runs here: the stager execs hundreds of short processes, ten times
// slower under TCG. (suites/labels.NativeLabel; the driver does not link
// Ginkgo's spec tree.)
const nativeLabel = "native"

// labelFilter is the Ginkgo label filter of a part, combined with the
// user's own (from the arguments after "--").
func labelFilter(part, user string) string {
	var f string
	switch part {
	case "native":
		f = nativeLabel
	case "labvm":
		f = "!" + nativeLabel
	}
	switch {
	case user == "":
		return f
	case f == "":
		return user
	}
	return "(" + user + ") && " + f
}

// splitLabelFilter takes --ginkgo.label-filter out of the extra arguments.
func splitLabelFilter(extra []string) (rest []string, filter string) {
	for i := 0; i < len(extra); i++ {
		a := extra[i]
		switch {
		case strings.HasPrefix(a, "--ginkgo.label-filter="), strings.HasPrefix(a, "-ginkgo.label-filter="):
			filter = a[strings.Index(a, "=")+1:]
		case a == "--ginkgo.label-filter" || a == "-ginkgo.label-filter":
			if i+1 < len(extra) {
				filter = extra[i+1]
				i++
			}
		default:
			rest = append(rest, a)
		}
	}
	return rest, filter
}

func (d *driver) junitPath(part string) string {
	if part == "all" {
		return filepath.Join(d.cfg.ReportDir, "junit.xml")
	}
	return filepath.Join(d.cfg.ReportDir, "junit-"+part+".xml")
}

// runPart runs the suite's specs of one part here and returns its exit code.
func (d *driver) runPart(ctx context.Context, part string) int {
	extra, user := splitLabelFilter(d.extra)
	args := append(append([]string{}, d.suiteArgs...), "--ginkgo.junit-report="+d.junitPath(part))
	if f := labelFilter(part, user); f != "" {
		args = append(args, "--ginkgo.label-filter="+f)
	}
	if labvm.Inside() {
		os.WriteFile(filepath.Join(d.cfg.ReportDir, "kernel-"+part+".txt"), []byte(kernelRelease()), 0o644)
	}
	return d.runSuite(ctx, append(args, extra...))
}

func (d *driver) run(ctx context.Context) int {
	if err := os.MkdirAll(d.cfg.ReportDir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if d.part == "all" {
		// An earlier run's changes must not be reported as this one's.
		if old, _ := filepath.Glob(subject.LedgerFiles(d.cfg.ReportDir)); len(old) > 0 {
			for _, f := range old {
				os.Remove(f)
			}
		}
	}
	if err := d.subj.Prepare(d.cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if d.part != "all" {
		return d.runPart(ctx, d.part)
	}
	os.RemoveAll(filepath.Join(d.cfg.ReportDir, "artifacts"))
	// An earlier run's verdicts must never stand in for a part that wrote none.
	for _, p := range []string{"all", "native", "labvm"} {
		if err := os.Remove(d.junitPath(p)); err != nil && !os.IsNotExist(err) {
			fmt.Fprintln(os.Stderr, "report:", err)
			return 1
		}
	}
	junit := d.junitPath("all")
	env := d.environment()
	code := 0
	if !d.inVM {
		code = d.runPart(ctx, "all")
		if _, err := os.Stat(junit); err != nil {
			env.BrokenParts = append(env.BrokenParts, fmt.Sprintf("the run wrote no JUnit (exit %d): no spec has a verdict", code))
			code = max(code, 1)
			writeEmptyJUnit(junit)
		}
	} else {
		start := time.Now()
		native := d.runPart(ctx, "native")
		mid := time.Now()
		lab := d.runInVM(ctx)
		code = max(native, lab)
		// Wall times of the two parts, for `make bench`.
		t, _ := json.Marshal(map[string]float64{
			"native_s": mid.Sub(start).Seconds(), "labvm_s": time.Since(mid).Seconds(), "labvm_boot_s": labvm.LastBootDuration().Seconds(),
		})
		os.WriteFile(filepath.Join(d.cfg.ReportDir, "timing.json"), t, 0o644)
		missing, err := mergeJUnit(junit, d.junitPath("native"), d.junitPath("labvm"))
		if err != nil {
			fmt.Fprintln(os.Stderr, "report:", err)
			return max(code, 1)
		}
		for _, m := range missing {
			part, exit := "native", native
			if m == d.junitPath("labvm") {
				part, exit = "labvm", lab
			}
			env.BrokenParts = append(env.BrokenParts, fmt.Sprintf("the %s part wrote no JUnit (exit %d): its specs have no verdict", part, exit))
			fmt.Fprintf(os.Stderr, "report: the %s part wrote no JUnit (%s): a failed part\n", part, m)
			code = max(code, 1)
		}
		vmKernel, _ := os.ReadFile(filepath.Join(d.cfg.ReportDir, "kernel-labvm.txt"))
		env.Where = fmt.Sprintf("datapath and ARP specs in the lab VM (QEMU, Debian kernel %s); stager specs natively (kernel %s)", vmKernel, env.Kernel)
		env.Kernel = fmt.Sprintf("%s (lab VM), %s (host)", vmKernel, env.Kernel)
	}
	cases, err := report.ReadJUnit(junit)
	if err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		return max(code, 1)
	}
	out := filepath.Join(d.cfg.ReportDir, "conformance.md")
	fails := report.Failures(cases)
	describeRelease(d.cfg, d.subj, &env) // again: the children's changes are in now
	vs := releaseVerdicts(d.subj, report.Verdicts(cases, d.cfg.ReportDir))
	if err := report.WriteConformance(out, env, vs, fails); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		return max(code, 1)
	}
	for _, v := range vs {
		if v.Verdict == "FAILED" {
			// A release that fails its guide fails the run, spec or not.
			code = max(code, 1)
		}
	}
	// The failures once more, last: Ginkgo's log of a long run buries them.
	for _, f := range fails {
		fmt.Printf("FAILED %s\n  %s\n", f.Name, strings.ReplaceAll(f.Message, "\n", "\n  "))
	}
	if line := report.NotObservableSummary(vs); line != "" {
		fmt.Println(line)
	}
	fmt.Printf("report: %s, %s\n", out, junit)
	return code
}

var (
	suitesRE = regexp.MustCompile(`(?s)<testsuites[^>]*>(.*)</testsuites>`)
	// A spec the part's label filter left out: Ginkgo records it as skipped
	// with the bare message "skipped" (a Skip() call says why).
	filteredRE = regexp.MustCompile(`(?s)\s*<testcase [^>]*status="skipped"[^>]*>\s*<skipped message="skipped"></skipped>\s*</testcase>`)
)

// mergeJUnit joins the <testsuite> elements of several Ginkgo JUnit files
// into one file, so junit.xml holds every spec of the run once. A spec a
// part's filter left out is recorded there as a bare "skipped", as is one
// skipped by an interrupt or a deadline: a bare skip is dropped only where
// another part ran the spec, and one copy is kept where none did, so a
// spec that never ran still shows. The suite-level counts stay per part.
// A part whose file does not exist is left out and returned in missing:
// the caller reports it as a failed part.
func mergeJUnit(out string, parts ...string) (missing []string, err error) {
	var bodies [][]byte
	ran := map[string]bool{} // specs some part gave a verdict other than a bare skip
	for _, p := range parts {
		b, err := os.ReadFile(p)
		if os.IsNotExist(err) {
			missing = append(missing, p)
			continue
		}
		if err != nil {
			return nil, err
		}
		m := suitesRE.FindSubmatch(b)
		if m == nil {
			return nil, fmt.Errorf("%s: no <testsuites>", p)
		}
		bodies = append(bodies, m[1])
		for _, tc := range testcaseRE.FindAll(m[1], -1) {
			if !filteredRE.Match(tc) {
				ran[caseName(tc)] = true
			}
		}
	}
	kept := map[string]bool{}
	var body strings.Builder
	for _, b := range bodies {
		body.Write(filteredRE.ReplaceAllFunc(b, func(tc []byte) []byte {
			n := caseName(tc)
			if ran[n] || kept[n] {
				return nil
			}
			kept[n] = true
			return tc
		}))
	}
	return missing, writeJUnit(out, body.String())
}

var (
	testcaseRE = regexp.MustCompile(`(?s)<testcase [^>]*>.*?</testcase>`)
	caseNameRE = regexp.MustCompile(`<testcase name="([^"]*)"`)
)

func caseName(tc []byte) string {
	if m := caseNameRE.FindSubmatch(tc); m != nil {
		return string(m[1])
	}
	return ""
}

func writeJUnit(path, suites string) error {
	return os.WriteFile(path, []byte(`<?xml version="1.0" encoding="UTF-8"?>`+"\n<testsuites>"+suites+"</testsuites>\n"), 0o644)
}

// writeEmptyJUnit stands for a run that wrote none: no spec, no verdict.
func writeEmptyJUnit(path string) {
	if err := writeJUnit(path, ""); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
	}
}

func (d *driver) environment() report.Environment {
	env := report.Environment{Tier: d.cfg.Tier, Control: d.cfg.Control, Where: "natively", Kernel: kernelRelease()}
	d.describeSubject(&env)
	if labvm.Inside() {
		env.Where = "in the lab VM (QEMU, Debian kernel)"
	}
	out, _ := exec.Command(filepath.Join(d.cfg.PluginDir, "bridge")).CombinedOutput()
	env.Plugins = strings.SplitN(strings.TrimSpace(string(out)), "\n", 2)[0] + " (" + d.cfg.PluginDir + ")"
	if d.cfg.Tier == "lab" && d.subj.Stages() {
		env.StagerDetails = stager.DescribeSubject(d.subj.StagerOptions(d.cfg))
	}
	describeRelease(d.cfg, d.subj, &env)
	return env
}

func kernelRelease() string {
	var u syscall.Utsname
	if syscall.Uname(&u) != nil {
		return "unknown"
	}
	return utsString(u.Release[:])
}

// describeSubject fills the rows that say what was tested.
func (d *driver) describeSubject(env *report.Environment) {
	c, cl := d.cfg, d.cfg.Cluster
	env.StagerSubject = "install-cni-plugins of " + d.subj.StagerManifest(c)
	env.Gateway = fmt.Sprintf("the suite's (a netns on the veth trunk, %s)", c.Gateway)
	if c.VendorMode() {
		env.Gateway = fmt.Sprintf("the user's (%s via --uplink %s)", c.Gateway, c.Uplink)
	}
	if c.Tier == "lab" {
		env.Workload = "lab stand-ins, not KubeVirt VMs: guest netns behind KubeVirt's bridge binding reproduced (netpod.go), launcher netns, libcni"
		env.KubeVirt = "none (the lab reproduces its bridge binding)"
		env.Guest = "a netns; the guide's cloud-init (fixtures/cloud-init/vlan100.yaml) applied by the suite's netplan reader"
		return
	}
	env.KubeVirt = describeKubeVirt(&cl)
	env.Guest = describeGuest(&cl)
	// The suite process decides the trunk the same way (cabling.Mode).
	if c.Kubeconfig == "" {
		if untagged, why := cabling.New(c).Mode(); untagged {
			env.AccessTrunk = why
		}
	}
	env.Workload = "vm: KubeVirt VMs, bridge binding"
	if cl.Workload == "pod" {
		env.Workload, env.Pods = "pods attached by Multus (no KubeVirt): the userData's netplan applied by the suite in the pod's netns", true
		env.KubeVirt, env.Guest = "not installed", "none (pods)"
	}
	if c.Kubeconfig != "" {
		env.Gateway = fmt.Sprintf("the user's (%s, on the cluster of --kubeconfig)", c.Gateway)
	}
}

// describeKubeVirt is the report's KubeVirt row: the release, and for a
// build made here (images/kubevirt/build.sh writes build.env beside the
// manifests it renders) the build and any patch applied, with its reason.
func describeKubeVirt(cl *config.ClusterConfig) string {
	out := fmt.Sprintf("%s release manifests (%s)", cl.KubeVirtVersion, cl.ManifestsDir)
	b, err := os.ReadFile(filepath.Join(cl.ManifestsDir, "kubevirt-operator", cl.KubeVirtVersion, "build.env"))
	if err != nil {
		return out
	}
	kv := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			kv[k] = v
		}
	}
	out = kv["KUBEVIRT_BUILD"]
	if p := kv["KUBEVIRT_PATCH"]; p != "" && p != "none" {
		return out + ", patch " + p + ": " + kv["KUBEVIRT_PATCH_WHY"]
	}
	return out + ", unpatched"
}

// describeGuest is the report's guest row: the image, how it boots, and the
// versions of its cloud-init and netplan where the image's label names them.
func describeGuest(cl *config.ClusterConfig) string {
	g := cl.Guest
	boot := "containerDisk"
	if g.KernelBoot != "" {
		boot = "kernelBoot " + g.KernelBoot
	}
	out := fmt.Sprintf("%s (%s, user %s); the guide's cloud-init (fixtures/cloud-init/vlan100.yaml)", g.Image, boot, g.User)
	if v := image.Label(g.Image, cl.Archives(), "io.vcf.guest.versions"); v != "" {
		out += "; in the image: " + strings.TrimSuffix(v, ";")
	}
	return out
}
