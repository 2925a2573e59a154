package platform

import (
	"fmt"
	"strings"
)

// missingNADReasons are the reasons a missing NAD is reported under:
// KubeVirt's virt-controller cannot render the launcher pod (an event, or
// in v1.8 the VMI's Synchronized=False condition, both FailedCreate), or
// Multus fails the pod sandbox (on the launcher pod).
var missingNADReasons = map[string]bool{"FailedCreate": true, "FailedCreatePodSandBox": true}

// MissingNADEvents keeps the Warning events that report the NAD namespace/nad
// missing for a VM: by reason, by involved object (its VMI or launcher
// pod), and by the not-found wording with the NAD's namespaced name, as
// KubeVirt writes it ("failed to locate network attachment definition
// namespace/nad") or as Multus does ("cannot find a
// network-attachment-definition (nad) in namespace (namespace)"). A
// FailedCreate that merely names the NAD for another reason does not count.
func MissingNADEvents(evs []Event, namespace, nad string) []Event {
	kubevirt := "failed to locate network attachment definition " + namespace + "/" + nad
	multus := fmt.Sprintf("cannot find a network-attachment-definition (%s) in namespace (%s)", nad, namespace)
	var out []Event
	for _, e := range evs {
		kind, _, _ := strings.Cut(e.Object, "/")
		switch {
		case e.Type != "Warning", !missingNADReasons[e.Reason]:
		case kind != "VirtualMachineInstance" && kind != "Pod":
		case strings.Contains(e.Message, kubevirt), strings.Contains(e.Message, multus):
			out = append(out, e)
		}
	}
	return out
}
