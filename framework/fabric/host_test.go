package fabric

import (
	"strings"
	"testing"
)

// The driver fails a run whose host snapshot changed; the diff must name
// what appeared and what went.
func TestDiffSnapshotsNamesEveryChange(t *testing.T) {
	before := "addr 192.0.2.5/24 dev eth0\nlink eth0 type device mtu 1500\nroute default via 192.0.2.1"
	after := "link eth0 type device mtu 1500\nlink vcf-leak type veth mtu 1500\nroute default via 192.0.2.1"
	got := DiffSnapshots(before, after)
	for _, want := range []string{"- addr 192.0.2.5/24 dev eth0", "+ link vcf-leak type veth mtu 1500"} {
		if !strings.Contains(got, want) {
			t.Errorf("diff lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "eth0 type device") || strings.Contains(got, "route default") {
		t.Errorf("diff names unchanged lines:\n%s", got)
	}
	if DiffSnapshots(before, before) != "" {
		t.Error("identical snapshots must give an empty diff")
	}
}

func TestHostSnapshotIsStable(t *testing.T) {
	a, err := HostSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := HostSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	if d := DiffSnapshots(a, b); d != "" {
		t.Fatalf("two snapshots of an idle namespace differ:\n%s", d)
	}
}
