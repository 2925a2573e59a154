package platform

import "testing"

func TestMissingNADEventsMatchReasonObjectAndNamespacedName(t *testing.T) {
	evs := []Event{
		{Object: "VirtualMachineInstance/vm-instance-x", Type: "Warning", Reason: "FailedCreate", Message: "failed to locate network attachment definition tenant-b/vlan100"},
		{Object: "Pod/virt-launcher-vm-instance-x-abcde", Type: "Warning", Reason: "FailedCreatePodSandBox", Message: "cannot find a network-attachment-definition (vlan100) in namespace (tenant-b): not found"},
		// KubeVirt v1.8.4's own report, seen live: the VMI's condition (VMIConditions).
		{Object: "VirtualMachineInstance/vm-instance-x", Type: "Warning", Reason: "FailedCreate", Message: "condition Synchronized=False: failed to render launch manifest: failed to locate network attachment definition tenant-b/vlan100"},
		// Not the missing NAD: another namespace's, another reason, a Normal event, another object.
		{Object: "VirtualMachineInstance/vm-instance-x", Type: "Warning", Reason: "FailedCreate", Message: "failed to locate network attachment definition tenant-a/vlan100"},
		{Object: "VirtualMachineInstance/vm-instance-x", Type: "Warning", Reason: "SyncFailed", Message: "tenant-b/vlan100 vlan100"},
		{Object: "VirtualMachineInstance/vm-instance-x", Type: "Normal", Reason: "FailedCreate", Message: "tenant-b/vlan100"},
		{Object: "VirtualMachine/x", Type: "Warning", Reason: "FailedCreate", Message: "tenant-b/vlan100"},
		{Object: "Pod/virt-launcher-vm-instance-x-abcde", Type: "Warning", Reason: "FailedCreatePodSandBox", Message: "vlan100100 is bad"},
		// The NAD named, but not as missing: another failure about it.
		{Object: "VirtualMachineInstance/vm-instance-x", Type: "Warning", Reason: "FailedCreate", Message: "Error creating pod: admission webhook denied network tenant-b/vlan100"},
		{Object: "Pod/virt-launcher-vm-instance-x-abcde", Type: "Warning", Reason: "FailedCreatePodSandBox", Message: "plugin type=\"bridge\" failed (add): network (vlan100) in namespace (tenant-b): bridge br100 not found"},
	}
	got := MissingNADEvents(evs, "tenant-b", "vlan100")
	if len(got) != 3 || got[0] != evs[0] || got[1] != evs[1] || got[2] != evs[2] {
		t.Errorf("matched %v, want the first three reports", got)
	}
}
