package workload

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/cozystack/vlan-conformance/framework/cloudinit"
	"github.com/cozystack/vlan-conformance/framework/config"
	"github.com/cozystack/vlan-conformance/framework/platform"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/kube"
	"github.com/cozystack/vlan-conformance/framework/platform/cluster/vm"
)

// InstanceName is the VirtualMachine's name for a vm-instance application
// (the chart's fullname: the release vm-instance-<name>).
func InstanceName(app string) string { return "vm-instance-" + app }

// CloudInitSecretName is the chart's Secret carrying the userData.
func CloudInitSecretName(app string) string { return InstanceName(app) + "-cloud-init" }

// GuestImage is the guest the VMs boot (config.GuestImage: a containerDisk
// or a kernel-boot image), its default user and console password.
type GuestImage = config.GuestImage

// Rendered is what the suite applies for one vm-instance application.
type Rendered struct {
	Secret *corev1.Secret
	VM     *kubevirtv1.VirtualMachine
}

// RenderVM renders a vm-instance application as the chart does for
// `networks: [{name: ...}]` and `cloudInit: |`: interfaces default (bridge)
// plus one bridge interface per network, networks default (pod) plus one
// multus network <namespace>/<name> per network, and the cloud-init userData
// in a Secret (userData only: the chart has no networkData). What the suite
// adds, and why: a containerDisk system disk (no CDI in the suite) or a
// kernel boot (bootFrom), the
// serial-console password appended to the userData, a node selector to place
// the VM, and its ownership label.
func RenderVM(spec platform.VMSpec, img GuestImage, nodeName string) Rendered {
	name := InstanceName(spec.Name)
	labels := map[string]string{
		"app.kubernetes.io/name":     "vm-instance",
		"app.kubernetes.io/instance": name,
		kube.OwnedLabel:              "true",
	}
	opts := []vm.Option{
		vm.WithLabels(labels),
		vm.WithRunStrategy(kubevirtv1.RunStrategyAlways),
		vm.WithTemplateAnnotation("kubevirt.io/allow-pod-bridge-network-live-migration", "true"),
		vm.WithResources(1, 1, "1Gi"),
		vm.WithFirmwareUUID(stableUUID(spec.Namespace, name)),
		vm.WithMachineType(""),
		bootFrom(img),
		vm.WithCloudInitSecret(CloudInitSecretName(spec.Name)),
		vm.WithBridgeInterface("default"),
	}
	for _, n := range spec.Networks {
		opts = append(opts, vm.WithBridgeInterface(n))
	}
	if spec.MAC != "" && len(spec.Networks) > 0 {
		opts = append(opts, vm.WithInterfaceMAC(spec.Networks[0], spec.MAC))
	}
	opts = append(opts, vm.WithTerminationGracePeriod(30), vm.WithPodNetwork("default"))
	for _, n := range spec.Networks {
		opts = append(opts, vm.WithMultusNetwork(n, spec.Namespace+"/"+n))
	}
	if o := placement(spec, nodeName); o != nil {
		opts = append(opts, o)
	}
	return Rendered{
		Secret: vm.CloudInitSecret(CloudInitSecretName(spec.Name), spec.Namespace, cloudinit.WithConsolePassword(spec.CloudInit, img.Password), vm.Labeled(labels)),
		VM:     vm.New(name, spec.Namespace, opts...),
	}
}

// bootFrom is the system disk the chart renders, or, for a kernel-boot guest
// image (its root in the initrd), KubeVirt's kernelBoot from that image.
func bootFrom(img GuestImage) vm.Option {
	if kernel, initrd := img.KernelPaths(); kernel != "" {
		return vm.WithKernelBoot(img.Image, kernel, initrd, img.KernelArgs)
	}
	return vm.WithContainerDisk("disk-system", img.Image, 1)
}

// stableUUID derives the firmware UUID from the namespace and name, as the
// chart does, so a re-created VM keeps its cloud-init instance identity and
// only its MAC changes.
func stableUUID(namespace, name string) string {
	sum := sha256.Sum256([]byte(namespace + "-" + name + "-"))
	h := hex.EncodeToString(sum[:])
	return fmt.Sprintf("%s-%s-4%s-9%s-%s", h[0:8], h[8:12], h[13:16], h[17:20], h[20:32])
}

// placement pins the VM to its node, or, with spec.AlsoOn, lets it run on
// any of them, its node first (nil: no node given).
func placement(spec platform.VMSpec, nodeName string) vm.Option {
	if nodeName == "" {
		return nil
	}
	if len(spec.AlsoOn) == 0 {
		return vm.WithNodeSelector(map[string]string{"kubernetes.io/hostname": nodeName})
	}
	nodes := []string{nodeName}
	for _, n := range spec.AlsoOn {
		nodes = append(nodes, n.Name())
	}
	return vm.WithNodeAffinity(nodes)
}
