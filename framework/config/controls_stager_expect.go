package config

// The failure each stager control must cause in its claim's own It (see
// Control.Expect). Kept apart from controls_stager.go, which the stager
// subject's work edits; a control missing here fails the claims unit test.
var stagerExpect = map[string]string{
	CtlStagerExtraPlugin:         "nothing but the 14 may be new",
	CtlStagerWritesLoopback:      "loopback: the image carried loopback",
	CtlStagerCopiesInPlace:       "the unlinked old inode",
	CtlStagerInstallsOnlyMissing: "on the second run",
	CtlStagerSkipsOlder:          "same-name plugins must be rewritten",
	CtlStagerRemovesOldCopy:      "must stay as it was",
	CtlStagerExitsNonZero:        "the pod must show Ready",
	CtlStagerGathersCauses:       "rather than printed as attempted",
	CtlStagerNoSummary:           `no line begins "failed to install:"`,
	CtlStagerNoPayloadGuard:      "the exact skip line",
	CtlStagerLeavesTemp:          "no temporary file may be left in /opt/cni/bin",
	CtlStagerImageWithLoopback:   "the image carried loopback",
	CtlStagerCopyAllRelease:      "the image carried",
	CtlStagerNestsInDirectory:    "the directory gained",
	CtlStagerPublishesTempDir:    "nothing must appear where there was none",
	CtlStagerStrandsKilledTemp:   "left by the killed run, is still in /opt/cni/bin",
}

func init() {
	for id, want := range stagerExpect {
		if c, ok := controls[id]; ok && c.Expect == "" {
			c.Expect = want
			controls[id] = c
		}
	}
}
