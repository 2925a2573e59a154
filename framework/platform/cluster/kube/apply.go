package kube

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"
)

// Applier applies objects with server-side apply.
type Applier struct {
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

func newApplier(cfg *rest.Config) (*Applier, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Applier{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}, nil
}

// Apply applies objects in order. A kind the API server does not know yet
// (a CRD applied a moment ago) is retried for up to a minute.
func (a *Applier) Apply(ctx context.Context, objs []*unstructured.Unstructured) error {
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		var mapping *meta.RESTMapping
		var err error
		for start := time.Now(); ; {
			mapping, err = a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err == nil || !meta.IsNoMatchError(err) || time.Since(start) > time.Minute {
				break
			}
			a.mapper.Reset()
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(2 * time.Second):
			}
		}
		if err != nil {
			return fmt.Errorf("apply %s %s: %w", gvk.Kind, o.GetName(), err)
		}
		var ri dynamic.ResourceInterface = a.dyn.Resource(mapping.Resource)
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			ns := o.GetNamespace()
			if ns == "" {
				ns = metav1.NamespaceDefault
			}
			ri = a.dyn.Resource(mapping.Resource).Namespace(ns)
		}
		if err := applyOne(ctx, ri, o); err != nil {
			return fmt.Errorf("apply %s %s/%s: %w", gvk.Kind, o.GetNamespace(), o.GetName(), err)
		}
	}
	return nil
}

// applyOne applies one object. An admission webhook whose pod is not serving
// yet (an operator applied a moment ago, or restarted with a kept cluster's
// nodes) is retried for up to two minutes: the API server reports it only as
// an internal error naming the webhook.
func applyOne(ctx context.Context, ri dynamic.ResourceInterface, o *unstructured.Unstructured) error {
	for start := time.Now(); ; {
		_, err := ri.Apply(ctx, o.GetName(), o, metav1.ApplyOptions{FieldManager: "vlan-conformance", Force: true})
		if err == nil || !webhookUnavailable(err) || time.Since(start) > 2*time.Minute {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(webhookRetry):
		}
	}
}

// webhookRetry is the pause between tries while a webhook is unavailable.
var webhookRetry = 3 * time.Second

// webhookUnavailable says whether err is the API server failing to call an
// admission webhook, which it reports only in the message of an internal
// error.
func webhookUnavailable(err error) bool {
	return apierrors.IsInternalError(err) && strings.Contains(err.Error(), "failed calling webhook")
}

// ApplyTyped applies typed objects (converted for the applier) in order.
func (a *Applier) ApplyTyped(ctx context.Context, objs ...any) error {
	var us []*unstructured.Unstructured
	for _, o := range objs {
		u, err := ToUnstructured(o)
		if err != nil {
			return err
		}
		us = append(us, u)
	}
	return a.Apply(ctx, us)
}

// Decode splits a multi-document manifest into objects.
func Decode(b []byte) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		var m map[string]any
		if err := d.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetKind() == "List" {
			items, _, _ := unstructured.NestedSlice(m, "items")
			for _, it := range items {
				if im, ok := it.(map[string]any); ok {
					out = append(out, &unstructured.Unstructured{Object: im})
				}
			}
			continue
		}
		out = append(out, u)
	}
}

// ToUnstructured converts a typed object for the applier.
func ToUnstructured(obj any) (*unstructured.Unstructured, error) {
	b, err := yaml.Marshal(obj)
	if err != nil {
		return nil, err
	}
	objs, err := Decode(b)
	if err != nil || len(objs) != 1 {
		return nil, fmt.Errorf("convert %T: %v", obj, err)
	}
	return objs[0], nil
}
