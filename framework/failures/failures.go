// Package failures names what a spec reports when its claim does not hold:
// the words of its assertion a negative control must make it fail with.
// The spec's assertion message is built from the value (`"re-creating %s
// "+failures.FreshMAC`) and the control in framework/config expects the
// same value, so rewording one rewords the other; the config unit test
// fails on a control whose failure no spec of its claim uses.
//
// Each value is plain text (no format verbs): the selftest finds it as it
// is in the failed assertion's message.
package failures

// ARP and MAC (CLAIMS.md ARP-).
const (
	FreshMAC                = "must give its VLAN NIC a fresh MAC"                // ARP-01
	GatewayHoldsOldMAC      = "must still hold the old MAC"                       // ARP-02
	RecoversWithin          = "must recover by itself within"                     // ARP-03
	RecoveryMeasuresNothing = "the recovery that follows measures nothing"        // ARP-03
	EntryFlipsToNewMAC      = "must flip to the new MAC"                          // ARP-04
	PinnedMACSurvives       = "the pinned MAC must survive re-creation"           // ARP-05
	CollisionFlaps          = "a MAC collision must show as"                      // ARP-06
	RestartFreshMAC         = "a restart gives the unpinned VLAN NIC a fresh MAC" // ARP-07
	DrainMigrates           = "a drain must live-migrate the VM"                  // ARP-08
)

// Staging the reference CNI plugins (CLAIMS.md STG-).
const (
	NothingButTheFourteen = "nothing but the 14 may be new" // STG-01
	// ImageCarried opens the account of a plugin the image offered and the
	// script installed (the half at fault, STG-02); its controls add the
	// plugin's name.
	ImageCarried          = "the image carried"                                // STG-02
	UnlinkedOldInode      = "the unlinked old inode"                           // STG-03
	OnTheSecondRun        = "on the second run"                                // STG-03
	SameNameRewritten     = "same-name plugins must be rewritten"              // STG-04
	NodeCopyStays         = "must stay as it was"                              // STG-05
	NothingAppears        = "nothing must appear where there was none"         // STG-05
	DirectoryGained       = "the directory gained"                             // STG-05
	PodShowsReady         = "the pod must show Ready"                          // STG-06
	NoLineBegins          = "no line begins"                                   // STG-06, then the summary's prefix, quoted
	CausesGathered        = "rather than printed as attempted"                 // STG-06
	ExactSkipLine         = "the exact skip line"                              // STG-07
	NoTemporaryFile       = "no temporary file may be left in /opt/cni/bin"    // STG-08
	KilledRunLeftover     = "left by the killed run, is still in /opt/cni/bin" // STG-08
	NoStagerInitContainer = "carries no install-cni-plugins"                   // STG-09
	RenderStops           = "the platform render must stop on"                 // STG-10
	MultusPodReady        = "the re-created Multus pod must become Ready"      // STG-11
	OneNodeAtATime        = "Multus must roll one node at a time"              // STG-12
)

// The datapath (CLAIMS.md VLAN-).
const (
	ReachesGateway = "must reach the gateway" // VLAN-01
	// Where a failed ping's frames stopped (framework/hops' line, VLAN-01):
	// the first hop its requests never reached, or the hop no reply left.
	NothingReached       = "nothing of it reached"                         // VLAN-01
	NoReplyLeft          = "no reply left"                                 // VLAN-01
	CrossesUntagged      = "may cross the trunk untagged"                  // VLAN-02
	NoReplyReachesGuest  = "no reply may reach the guest"                  // VLAN-03
	NoHostARPAtChild     = "no ARP frame of the host"                      // VLAN-04
	NoConnectionToParent = "must not open a connection"                    // VLAN-04
	NotTheNodeAddress    = "does not carry the node's address"             // VLAN-05
	ConnectsToService    = "must connect to the service"                   // VLAN-05
	CarriesNoIP          = "must carry no IP"                              // VLAN-06
	DefaultRouteOnPodNIC = "the default route must stay on the pod NIC"    // VLAN-07
	GoesUnanswered       = "must go unanswered"                            // VLAN-08
	SeenLeaving          = "must be seen leaving"                          // VLAN-08
	NamesMissingPlugin   = "must fail naming the missing plugin"           // VLAN-09
	DroppedOnSmallerPath = "must be dropped on a path smaller"             // VLAN-10
	ReportsNADMissing    = "must report the NAD missing"                   // VLAN-11
	SpoofchkDrops        = "macspoofchk must drop every frame"             // VLAN-12
	RefusesToEnslave     = "must refuse to enslave"                        // VLAN-13
	NewBridgeMade        = "the bridge plugin must have made a new bridge" // VLAN-14
	AttachesAfterStaging = "after staging the same NAD must attach"        // VLAN-15
)

// The node's provisioning, the guide's step 1 (CLAIMS.md NODE-).
const (
	SubinterfaceCarriesNoAddress = "the VLAN sub-interface br100 enslaves must carry no address" // NODE-01
	DefaultRouteOffBridge        = "the node's default route must stay off br100"                // NODE-02
	MTUsNeverGrow                = "must not exceed the MTU of the link before it"               // NODE-03
)
