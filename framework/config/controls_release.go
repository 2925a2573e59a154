package config

// Release controls: the release under test (--cozystack) edited at run
// time, in a copy the control makes, so that one promise of its charts is
// broken. They need --cozystack; without it the control cannot be built.
const (
	// CtlReleaseTypoResolvesFalse: the platform's stageCniPlugins helper
	// resolves an unreadable spelling to false instead of failing.
	CtlReleaseTypoResolvesFalse = "STG-10/helper-resolves-typo-to-false"
)

func init() {
	register(
		Control{ID: CtlReleaseTypoResolvesFalse, Claim: "STG-10", NeedsRelease: true,
			Description: "the platform chart's cozystack.platform.stageCniPlugins helper resolves a typo to false instead of failing",
			Expect:      "the platform render must stop on"},
	)
}
