package kubevirt

import (
	"testing"
	"time"
)

// The probe answers within its timeout whatever the host: usable, absent,
// or a device that opens and then hangs its guests (this CI's machine).
func TestKVMProbeAnswers(t *testing.T) {
	start := time.Now()
	ok, why := KVMUsable(3 * time.Second)
	if time.Since(start) > 5*time.Second || why == "" {
		t.Fatalf("probe took %s, reason %q", time.Since(start), why)
	}
	t.Logf("KVM usable: %v (%s)", ok, why)
}
