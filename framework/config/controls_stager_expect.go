package config

// The failure each stager control must cause in its claim's own It (see
// Control.Expect). Kept apart from controls_stager.go, which the stager
// subject's work edits; a control missing here fails the claims unit test.
var stagerExpect = map[string]string{
	CtlStagerExtraPlugin:         "must be exactly the 14",
	CtlStagerWritesLoopback:      "loopback",
	CtlStagerCopiesInPlace:       "the unlinked old inode",
	CtlStagerInstallsOnlyMissing: "on the second run",
	CtlStagerSkipsOlder:          "rewritten",
	CtlStagerRemovesOldCopy:      "must stay as it was",
	CtlStagerExitsNonZero:        "the pod must show Ready",
	CtlStagerGathersCauses:       "rather than printed as attempted",
	CtlStagerNoSummary:           `no line begins "failed to install:"`,
	CtlStagerNoPayloadGuard:      "the exact skip line",
	CtlStagerLeavesTemp:          "to be empty",
}

func init() {
	for id, want := range stagerExpect {
		if c, ok := controls[id]; ok && c.Expect == "" {
			c.Expect = want
			controls[id] = c
		}
	}
}
