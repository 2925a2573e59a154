package kubevirt

import (
	"fmt"
	"os"
	"runtime"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// KVM ioctls (linux/kvm.h).
const (
	kvmGetAPIVersion       = 0xAE00
	kvmCreateVM            = 0xAE01
	kvmGetVCPUMmapSize     = 0xAE04
	kvmCreateVCPU          = 0xAE41
	kvmSetUserMemoryRegion = 0x4020AE46
	kvmRun                 = 0xAE80
	kvmGetSregs            = 0x8138AE83
	kvmSetSregs            = 0x4138AE84
	kvmSetRegs             = 0x4090AE82
	kvmExitHLT             = 5
)

// KVMUsable reports whether hardware virtualisation works here, by running
// a one-instruction guest (hlt) and waiting for its exit. Opening /dev/kvm
// is not enough: on some hosts the device opens and a guest then hangs at
// its first instruction, so KubeVirt must be told to emulate. Nor is hlt
// enough everywhere: on a nested host (docs/cluster-tier.md, "KVM instead
// of TCG") the probe passes and a real guest's QEMU then aborts on an MSR
// or crawls through its kernel's boot; there /dev/vhost-net is missing too,
// which keeps auto on emulation. A probe that hangs is abandoned after
// timeout (its thread stays blocked).
func KVMUsable(timeout time.Duration) (bool, string) {
	done := make(chan error, 1)
	go func() { done <- kvmProbe() }()
	select {
	case err := <-done:
		if err != nil {
			return false, err.Error()
		}
		return true, "a test guest ran to hlt under KVM"
	case <-time.After(timeout):
		return false, fmt.Sprintf("a test guest under KVM did not reach hlt within %s", timeout)
	}
}

func ioctl(fd int, req, arg uintptr) (uintptr, error) {
	r, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), req, arg)
	if errno != 0 {
		return 0, errno
	}
	return r, nil
}

func kvmProbe() error {
	runtime.LockOSThread()
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("/dev/kvm: %w", err)
	}
	defer f.Close()
	kvm := int(f.Fd())
	if v, err := ioctl(kvm, kvmGetAPIVersion, 0); err != nil || v != 12 {
		return fmt.Errorf("/dev/kvm: API version %d, %v", v, err)
	}
	vmfd, err := ioctl(kvm, kvmCreateVM, 0)
	if err != nil {
		return fmt.Errorf("KVM_CREATE_VM: %w", err)
	}
	defer unix.Close(int(vmfd))
	mem, err := unix.Mmap(-1, 0, 0x1000, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_ANONYMOUS)
	if err != nil {
		return err
	}
	defer unix.Munmap(mem)
	mem[0] = 0xf4 // hlt
	region := struct {
		slot, flags             uint32
		guestPhys, size, userVA uint64
	}{0, 0, 0, 0x1000, uint64(uintptr(unsafe.Pointer(&mem[0])))}
	if _, err := ioctl(int(vmfd), kvmSetUserMemoryRegion, uintptr(unsafe.Pointer(&region))); err != nil {
		return fmt.Errorf("KVM_SET_USER_MEMORY_REGION: %w", err)
	}
	vcpu, err := ioctl(int(vmfd), kvmCreateVCPU, 0)
	if err != nil {
		return fmt.Errorf("KVM_CREATE_VCPU: %w", err)
	}
	defer unix.Close(int(vcpu))
	size, err := ioctl(kvm, kvmGetVCPUMmapSize, 0)
	if err != nil {
		return err
	}
	run, err := unix.Mmap(int(vcpu), 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return err
	}
	defer unix.Munmap(run)
	var sregs [312]byte
	if _, err := ioctl(int(vcpu), kvmGetSregs, uintptr(unsafe.Pointer(&sregs[0]))); err != nil {
		return fmt.Errorf("KVM_GET_SREGS: %w", err)
	}
	// Real mode, code segment at 0: cs.base (offset 0) and cs.selector (12).
	*(*uint64)(unsafe.Pointer(&sregs[0])) = 0
	*(*uint16)(unsafe.Pointer(&sregs[12])) = 0
	if _, err := ioctl(int(vcpu), kvmSetSregs, uintptr(unsafe.Pointer(&sregs[0]))); err != nil {
		return fmt.Errorf("KVM_SET_SREGS: %w", err)
	}
	var regs [18]uint64 // rax..r15, rip, rflags
	regs[16], regs[17] = 0, 2
	if _, err := ioctl(int(vcpu), kvmSetRegs, uintptr(unsafe.Pointer(&regs[0]))); err != nil {
		return fmt.Errorf("KVM_SET_REGS: %w", err)
	}
	if _, err := ioctl(int(vcpu), kvmRun, 0); err != nil {
		return fmt.Errorf("KVM_RUN: %w", err)
	}
	if reason := *(*uint32)(unsafe.Pointer(&run[8])); reason != kvmExitHLT {
		return fmt.Errorf("the test guest exited with reason %d, not hlt", reason)
	}
	return nil
}
