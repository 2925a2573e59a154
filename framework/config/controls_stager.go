package config

import (
	"slices"

	"github.com/cozystack/vlan-conformance/framework/stager"
)

// Stager controls (CLAIMS.md, STG-): mutants of the reference subject in
// fixtures/stager/mutants, each breaking one promise of the guide's
// "Staging the reference CNI plugins". The specs run unchanged against the
// mutant --stager-manifest; the named claim's specs must FAIL.
const (
	CtlStagerRemovesOldCopy      = "STG-05/mutant-removes-old-copy"
	CtlStagerExitsNonZero        = "STG-06/mutant-exits-nonzero"
	CtlStagerCopiesInPlace       = "STG-03/mutant-copies-in-place"
	CtlStagerWritesLoopback      = "STG-02/mutant-writes-loopback"
	CtlStagerInstallsOnlyMissing = "STG-03/mutant-installs-only-missing"
	CtlStagerNoSummary           = "STG-06/mutant-no-summary"
	CtlStagerGathersCauses       = "STG-06/mutant-gathers-causes"
	CtlStagerLeavesTemp          = "STG-08/mutant-leaves-temp"
	CtlStagerNoPayloadGuard      = "STG-07/mutant-no-payload-guard"
	CtlStagerPublishesTempDir    = "STG-05/mutant-publishes-temp-directory"
	CtlStagerNestsInDirectory    = "STG-05/mutant-nests-in-directory"
	CtlStagerStrandsKilledTemp   = "STG-08/mutant-strands-killed-temp"
	// The same mutants, judged by the claims they also break.
	CtlStagerExtraPlugin = "STG-01/mutant-writes-loopback"
	CtlStagerSkipsOlder  = "STG-04/mutant-installs-only-missing"
	// A script that copies all the image offers (as Cozystack's does) is
	// right only with an image that carries the 14 alone.
	CtlStagerImageWithLoopback = "STG-02/copy-all-image-with-loopback"
	CtlStagerCopyAllRelease    = "STG-02/copy-all-release-image"
	// VLAN-15 is proven on a staged directory.
	CtlStagedWithoutMacvlan = "VLAN-15/image-without-macvlan"
)

// StagerImagePlugins are the plugins the image the suite builds carries:
// with --cozystack the names the release's Dockerfile extracts, else nil
// (the 14); more where a control needs an image that carries more.
func (c *Config) StagerImagePlugins() []string {
	var base []string
	if s := c.Subject(); s != nil {
		base = s.Image.Plugins
	}
	extended := func(more ...string) []string {
		if base == nil {
			base = stager.StagedPlugins
		}
		return append(append([]string{}, base...), more...)
	}
	switch c.Control {
	case CtlStagedWithoutMacvlan:
		if base == nil {
			base = stager.StagedPlugins
		}
		return slices.DeleteFunc(slices.Clone(base), func(p string) bool { return p == "macvlan" })
	case CtlStagerImageWithLoopback:
		return extended("loopback")
	case CtlStagerCopyAllRelease, CtlStagerWritesLoopback, CtlStagerExtraPlugin:
		// Without loopback in the image the mutant could not write it.
		return extended(stager.LeftAlone...)
	}
	return base
}

const copyAllManifest = "--stager-manifest=fixtures/stager/copy-all-daemonset.yaml"

func stagerMutant(file string) []string {
	return []string{"--stager-manifest=fixtures/stager/mutants/" + file}
}

func init() {
	register(
		Control{ID: CtlStagerRemovesOldCopy, Claim: "STG-05", Description: "install-cni-plugins removes the node's file when it fails to write a plugin", ExtraArgs: stagerMutant("removes-old-copy.yaml")},
		Control{ID: CtlStagerExitsNonZero, Claim: "STG-06", Description: "install-cni-plugins exits 1 when a plugin failed", ExtraArgs: stagerMutant("exits-nonzero.yaml")},
		Control{ID: CtlStagerCopiesInPlace, Claim: "STG-03", Description: "install-cni-plugins copies over the destination in place instead of renaming", ExtraArgs: stagerMutant("copies-in-place.yaml")},
		Control{ID: CtlStagerWritesLoopback, Claim: "STG-02", Description: "install-cni-plugins stages loopback too", ExtraArgs: stagerMutant("writes-loopback.yaml")},
		Control{ID: CtlStagerInstallsOnlyMissing, Claim: "STG-03", Description: "install-cni-plugins installs only plugins the node lacks", ExtraArgs: stagerMutant("installs-only-missing.yaml")},
		Control{ID: CtlStagerNoSummary, Claim: "STG-06", Description: "install-cni-plugins prints no `failed to install:` summary", ExtraArgs: stagerMutant("no-summary.yaml")},
		Control{ID: CtlStagerGathersCauses, Claim: "STG-06", Description: "install-cni-plugins prints every cause next to the summary instead of as each plugin is attempted", ExtraArgs: stagerMutant("gathers-causes.yaml")},
		Control{ID: CtlStagerNoPayloadGuard, Claim: "STG-07", Description: "install-cni-plugins does not check for /cni-plugins before staging", ExtraArgs: stagerMutant("no-payload-guard.yaml")},
		Control{ID: CtlStagerExtraPlugin, Claim: "STG-01", Description: "install-cni-plugins stages loopback too: more than the 14", ExtraArgs: stagerMutant("writes-loopback.yaml")},
		Control{ID: CtlStagerSkipsOlder, Claim: "STG-04", Description: "install-cni-plugins installs only plugins the node lacks: Talos' four are not rewritten, older copies stay", ExtraArgs: stagerMutant("installs-only-missing.yaml")},
		Control{ID: CtlStagerImageWithLoopback, Claim: "STG-02", Description: "the image carries loopback next to the 14 and the script copies all it finds", ExtraArgs: []string{copyAllManifest}},
		Control{ID: CtlStagerCopyAllRelease, Claim: "STG-02", Description: "the image carries all 18 plugins of the release and the script copies all it finds", ExtraArgs: []string{copyAllManifest}},
		Control{ID: CtlStagerPublishesTempDir, Claim: "STG-05", Description: "install-cni-plugins copies into a directory an earlier run left at its temporary path and publishes it as the plugin", ExtraArgs: stagerMutant("publishes-temp-directory.yaml")},
		Control{ID: CtlStagerNestsInDirectory, Claim: "STG-05", Description: "install-cni-plugins moves the plugin into a directory at the destination", ExtraArgs: stagerMutant("nests-in-directory.yaml")},
		Control{ID: CtlStagerStrandsKilledTemp, Claim: "STG-08", Description: "install-cni-plugins uses a fresh temporary name each run and never clears what a killed run left", ExtraArgs: stagerMutant("strands-killed-temp.yaml")},
		Control{ID: CtlStagedWithoutMacvlan, Claim: "VLAN-15", Native: true, Description: "the image's /cni-plugins lacks macvlan (a Dockerfile that extracts the other 13): staging cannot mend the NAD", Expect: "after staging the same NAD must attach"},
		Control{ID: CtlStagerLeavesTemp, Claim: "STG-08", Description: "install-cni-plugins leaves its temporary file behind on failure", ExtraArgs: stagerMutant("leaves-temp.yaml")},
	)
}
