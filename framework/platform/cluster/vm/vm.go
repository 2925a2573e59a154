// Package vm builds the Kubernetes objects of a vm-instance application as
// the Cozystack chart renders them: the VirtualMachine, its cloud-init
// Secret, the NetworkAttachmentDefinition and the tenant Namespace. Like
// KubeVirt's libvmi, the builders are functional options that hold no logic
// and make no API calls: the composition lives in the cluster platform
// (render.go), the assertions in the tests.
package vm

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// Option changes a VirtualMachine being built.
type Option func(*kubevirtv1.VirtualMachine)

// New returns a VirtualMachine with an empty instance template, then applies opts.
func New(name, namespace string, opts ...Option) *kubevirtv1.VirtualMachine {
	vm := &kubevirtv1.VirtualMachine{
		TypeMeta:   metav1.TypeMeta{APIVersion: kubevirtv1.SchemeGroupVersion.String(), Kind: "VirtualMachine"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: kubevirtv1.VirtualMachineSpec{
			Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{},
		},
	}
	for _, o := range opts {
		o(vm)
	}
	return vm
}

func tmpl(vm *kubevirtv1.VirtualMachine) *kubevirtv1.VirtualMachineInstanceSpec {
	return &vm.Spec.Template.Spec
}

// WithLabels labels both the VirtualMachine and its instance template.
func WithLabels(labels map[string]string) Option {
	return func(vm *kubevirtv1.VirtualMachine) {
		for _, m := range []*metav1.ObjectMeta{&vm.ObjectMeta, &vm.Spec.Template.ObjectMeta} {
			if m.Labels == nil {
				m.Labels = map[string]string{}
			}
			for k, v := range labels {
				m.Labels[k] = v
			}
		}
	}
}

// WithTemplateAnnotation annotates the instance template.
func WithTemplateAnnotation(key, value string) Option {
	return func(vm *kubevirtv1.VirtualMachine) {
		m := &vm.Spec.Template.ObjectMeta
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		m.Annotations[key] = value
	}
}

// WithRunStrategy sets spec.runStrategy.
func WithRunStrategy(s kubevirtv1.VirtualMachineRunStrategy) Option {
	return func(vm *kubevirtv1.VirtualMachine) { vm.Spec.RunStrategy = &s }
}

// WithInstancetype sets the cluster instance type matcher.
func WithInstancetype(name string) Option {
	return func(vm *kubevirtv1.VirtualMachine) {
		vm.Spec.Instancetype = &kubevirtv1.InstancetypeMatcher{Kind: "VirtualMachineClusterInstancetype", Name: name}
	}
}

// WithPreference sets the cluster preference matcher (vm-instance's instanceProfile).
func WithPreference(name string) Option {
	return func(vm *kubevirtv1.VirtualMachine) {
		vm.Spec.Preference = &kubevirtv1.PreferenceMatcher{Kind: "VirtualMachineClusterPreference", Name: name}
	}
}

// WithResources sizes the domain: cores on sockets, memory request.
func WithResources(cores, sockets uint32, memory string) Option {
	return func(vm *kubevirtv1.VirtualMachine) {
		d := &tmpl(vm).Domain
		d.CPU = &kubevirtv1.CPU{Cores: cores, Sockets: sockets}
		d.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse(memory)}
	}
}

// WithFirmwareUUID sets the firmware UUID (cloud-init's instance identity).
func WithFirmwareUUID(uuid string) Option {
	return func(vm *kubevirtv1.VirtualMachine) {
		s := tmpl(vm)
		if s.Domain.Firmware == nil {
			s.Domain.Firmware = &kubevirtv1.Firmware{}
		}
		s.Domain.Firmware.UUID = types.UID(uuid)
	}
}

// WithMachineType sets domain.machine.type ("" = the cluster default).
func WithMachineType(t string) Option {
	return func(vm *kubevirtv1.VirtualMachine) { tmpl(vm).Domain.Machine = &kubevirtv1.Machine{Type: t} }
}

// WithTerminationGracePeriod sets terminationGracePeriodSeconds.
func WithTerminationGracePeriod(seconds int64) Option {
	return func(vm *kubevirtv1.VirtualMachine) { tmpl(vm).TerminationGracePeriodSeconds = &seconds }
}

// WithContainerDisk adds a boot disk backed by a containerDisk image.
func WithContainerDisk(name, image string, bootOrder uint) Option {
	return func(vm *kubevirtv1.VirtualMachine) {
		s := tmpl(vm)
		s.Domain.Devices.Disks = append(s.Domain.Devices.Disks, kubevirtv1.Disk{
			Name: name, BootOrder: &bootOrder,
			DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{}},
		})
		s.Volumes = append(s.Volumes, kubevirtv1.Volume{
			Name: name, VolumeSource: kubevirtv1.VolumeSource{ContainerDisk: &kubevirtv1.ContainerDiskSource{
				Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
			}},
		})
	}
}

// WithKernelBoot boots the kernel and initrd of a kernel-boot image
// (KubeVirt's spec.domain.firmware.kernelBoot), with no system disk.
func WithKernelBoot(image, kernelPath, initrdPath, args string) Option {
	return func(vm *kubevirtv1.VirtualMachine) {
		s := tmpl(vm)
		if s.Domain.Firmware == nil {
			s.Domain.Firmware = &kubevirtv1.Firmware{}
		}
		s.Domain.Firmware.KernelBoot = &kubevirtv1.KernelBoot{
			KernelArgs: args,
			Container: &kubevirtv1.KernelBootContainer{
				Image: image, KernelPath: kernelPath, InitrdPath: initrdPath, ImagePullPolicy: corev1.PullIfNotPresent,
			},
		}
	}
}

// WithCloudInitSecret adds the cloudinitdisk, NoCloud userData from a Secret.
func WithCloudInitSecret(secretName string) Option {
	return func(vm *kubevirtv1.VirtualMachine) {
		s := tmpl(vm)
		s.Domain.Devices.Disks = append(s.Domain.Devices.Disks, kubevirtv1.Disk{
			Name: "cloudinitdisk", DiskDevice: kubevirtv1.DiskDevice{Disk: &kubevirtv1.DiskTarget{}},
		})
		s.Volumes = append(s.Volumes, kubevirtv1.Volume{
			Name: "cloudinitdisk", VolumeSource: kubevirtv1.VolumeSource{CloudInitNoCloud: &kubevirtv1.CloudInitNoCloudSource{
				UserDataSecretRef: &corev1.LocalObjectReference{Name: secretName},
			}},
		})
	}
}

// WithBridgeInterface adds an interface with bridge binding.
func WithBridgeInterface(name string) Option {
	return func(vm *kubevirtv1.VirtualMachine) {
		s := tmpl(vm)
		s.Domain.Devices.Interfaces = append(s.Domain.Devices.Interfaces, kubevirtv1.Interface{
			Name: name, InterfaceBindingMethod: kubevirtv1.InterfaceBindingMethod{Bridge: &kubevirtv1.InterfaceBridge{}},
		})
	}
}

// WithInterfaceMAC pins the MAC of an interface added before.
func WithInterfaceMAC(name, mac string) Option {
	return func(vm *kubevirtv1.VirtualMachine) {
		ifs := tmpl(vm).Domain.Devices.Interfaces
		for i := range ifs {
			if ifs[i].Name == name {
				ifs[i].MacAddress = mac
			}
		}
	}
}

// WithPodNetwork adds the pod network under a name.
func WithPodNetwork(name string) Option {
	return func(vm *kubevirtv1.VirtualMachine) {
		s := tmpl(vm)
		s.Networks = append(s.Networks, kubevirtv1.Network{
			Name: name, NetworkSource: kubevirtv1.NetworkSource{Pod: &kubevirtv1.PodNetwork{}},
		})
	}
}

// WithMultusNetwork adds a secondary network: a NAD as "<namespace>/<name>".
func WithMultusNetwork(name, networkName string) Option {
	return func(vm *kubevirtv1.VirtualMachine) {
		s := tmpl(vm)
		s.Networks = append(s.Networks, kubevirtv1.Network{
			Name: name, NetworkSource: kubevirtv1.NetworkSource{Multus: &kubevirtv1.MultusNetwork{NetworkName: networkName}},
		})
	}
}

// WithNodeSelector pins the instance to nodes with these labels.
func WithNodeSelector(sel map[string]string) Option {
	return func(vm *kubevirtv1.VirtualMachine) { tmpl(vm).NodeSelector = sel }
}

// WithNodeAffinity lets the instance run on any of nodes (by hostname),
// preferring the first: a placement a live migration can leave.
func WithNodeAffinity(nodes []string) Option {
	return func(vm *kubevirtv1.VirtualMachine) {
		term := func(names ...string) corev1.NodeSelectorTerm {
			return corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: names}}}
		}
		tmpl(vm).Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution:  &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{term(nodes...)}},
			PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 100, Preference: term(nodes[0])}},
		}}
	}
}

// WithoutDisk removes a disk and the volume of the same name.
func WithoutDisk(name string) Option {
	return func(vm *kubevirtv1.VirtualMachine) {
		s := tmpl(vm)
		s.Domain.Devices.Disks = slices.DeleteFunc(s.Domain.Devices.Disks, func(d kubevirtv1.Disk) bool { return d.Name == name })
		s.Volumes = slices.DeleteFunc(s.Volumes, func(v kubevirtv1.Volume) bool { return v.Name == name })
	}
}
