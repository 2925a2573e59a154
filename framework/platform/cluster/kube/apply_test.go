package kube

import (
	"context"
	"errors"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
)

// The API server reports a webhook whose pod is not serving as an internal
// error (what a kept cluster's KubeVirt CR met right after its nodes
// restarted); the applier waits it out, and gives up on anything else.
func TestApplyWaitsForAnUnavailableWebhook(t *testing.T) {
	webhookRetry = 10 * time.Millisecond
	refused := apierrors.NewInternalError(errors.New(`failed calling webhook "kubevirt-update-validator.kubevirt.io": failed to call webhook: Post "https://kubevirt-operator-webhook.kubevirt.svc:443/kubevirt-validate-update?timeout=10s": dial tcp 10.96.227.115:443: connect: connection refused`))
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "kubevirt.io", Resource: "kubevirts"}, "kubevirt", errors.New("denied"))
	for _, tc := range []struct {
		name      string
		failures  []error
		wantTries int
		wantErr   bool
	}{
		{name: "webhook refuses twice, then serves", failures: []error{refused, refused}, wantTries: 3},
		{name: "denied by the webhook", failures: []error{forbidden}, wantTries: 1, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gvr := schema.GroupVersionResource{Group: "kubevirt.io", Version: "v1", Resource: "kubevirts"}
			dyn := fake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "KubeVirtList"})
			tries := 0
			dyn.PrependReactor("patch", "kubevirts", func(k8stesting.Action) (bool, runtime.Object, error) {
				tries++
				if tries <= len(tc.failures) {
					return true, nil, tc.failures[tries-1]
				}
				return true, &unstructured.Unstructured{}, nil
			})
			o := &unstructured.Unstructured{}
			o.SetAPIVersion("kubevirt.io/v1")
			o.SetKind("KubeVirt")
			o.SetNamespace("kubevirt")
			o.SetName("kubevirt")
			err := applyOne(context.Background(), dyn.Resource(gvr).Namespace("kubevirt"), o)
			if (err != nil) != tc.wantErr || tries != tc.wantTries {
				t.Fatalf("applyOne: err %v after %d tries; want error %v after %d", err, tries, tc.wantErr, tc.wantTries)
			}
		})
	}
}
