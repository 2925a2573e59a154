package config

// Controls of the cluster-only claims (VLAN-11, STG-09, STG-11). Each breaks a
// subject only a kind cluster the suite makes has, so each is a cluster run
// of its own: `make selftest-cluster OFFLINE=1`.
const (
	CtlNADInVMNamespace = "VLAN-11/nad-copied-into-vm-namespace"
	CtlStagingKeptOn    = "STG-09/staging-kept-on"
	CtlStagerFailsPod   = "STG-11/stager-fails-its-container"
)

func init() {
	register(
		Control{ID: CtlNADInVMNamespace, Claim: "VLAN-11", Tier: "cluster", Description: "every NAD the run applies is also copied into the VM's own namespace, as a NAD replicator would: the VM there gets its VLAN NIC", Expect: "must report"},
		Control{ID: CtlStagingKeptOn, Claim: "STG-09", Tier: "cluster", Description: "the Multus chart keeps the stager's init container with stageCniPlugins: false", Expect: "carries no install-cni-plugins"},
		Control{ID: CtlStagerFailsPod, Claim: "STG-11", Tier: "cluster", Description: "the stager's init container exits 1 whenever its script wrote a termination message: a plugin it cannot write keeps the Multus pod from Ready", Expect: "init container install-cni-plugins exited 1"},
	)
}
