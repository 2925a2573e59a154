package kube

import (
	"context"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// A tenant namespace an earlier run left terminating is waited out and
// made afresh, as this run's own: applying into it while it terminates is
// forbidden (seen on a kept cluster, the second of two runs in a row).
func TestEnsureNamespaceWaitsOutATerminatingOne(t *testing.T) {
	namespaceGonePoll = 10 * time.Millisecond
	now := metav1.Now()
	old := &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: "tenant-arp", DeletionTimestamp: &now, Finalizers: []string{"kubernetes"}},
		Status:     corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating},
	}
	k := fake.NewSimpleClientset(old)
	go func() {
		time.Sleep(200 * time.Millisecond)
		k.CoreV1().Namespaces().Delete(context.Background(), "tenant-arp", metav1.DeleteOptions{})
	}()
	var o Owner
	start := time.Now()
	if err := o.EnsureNamespace(context.Background(), &Clients{Kube: k}, "tenant-arp"); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 150*time.Millisecond {
		t.Errorf("returned after %s, while the old namespace was still terminating", took)
	}
	ns, err := k.CoreV1().Namespaces().Get(context.Background(), "tenant-arp", metav1.GetOptions{})
	if err != nil || ns.DeletionTimestamp != nil || ns.Labels[OwnedLabel] != "true" {
		t.Fatalf("the namespace afterwards: %+v, %v; want a fresh one of the suite's", ns, err)
	}
	if _, namespaces := o.Drain(); len(namespaces) != 1 || namespaces[0] != "tenant-arp" {
		t.Errorf("the run owns %v, want the namespace it made afresh", namespaces)
	}
	// One that exists and is not terminating is left as it is, not the run's.
	var o2 Owner
	if err := o2.EnsureNamespace(context.Background(), &Clients{Kube: k}, "tenant-arp"); err != nil {
		t.Fatal(err)
	}
	if _, namespaces := o2.Drain(); len(namespaces) != 0 {
		t.Errorf("a namespace found is not the run's: %v", namespaces)
	}
}

// A rerun deletes what a killed run left: the tenant namespaces labelled
// as the suite's that are not already going; the others stay.
func TestSweepNamespacesDeletesWhatAKilledRunLeft(t *testing.T) {
	now := metav1.Now()
	k := fake.NewSimpleClientset(
		RenderNamespace("tenant-spoofchk"),
		RenderNamespace("tenant-arp"),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant-going", Labels: Owned(), DeletionTimestamp: &now, Finalizers: []string{"kubernetes"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "vendor-tenant"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt"}},
	)
	swept, err := SweepNamespaces(context.Background(), &Clients{Kube: k})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"tenant-arp", "tenant-spoofchk"}; !slices.Equal(swept, want) {
		t.Errorf("swept %v, want %v", swept, want)
	}
	list, err := k.CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, ns := range list.Items {
		left = append(left, ns.Name)
	}
	slices.Sort(left)
	if want := []string{"kubevirt", "tenant-going", "vendor-tenant"}; !slices.Equal(left, want) {
		t.Errorf("left %v, want %v", left, want)
	}
}
