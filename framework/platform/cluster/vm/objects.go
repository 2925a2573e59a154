package vm

import (
	nadv1 "github.com/k8snetworkplumbingwg/network-attachment-definition-client/pkg/apis/k8s.cni.cncf.io/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MetaOption changes the metadata of a Namespace, Secret or NAD being built.
type MetaOption func(*metav1.ObjectMeta)

// Labeled adds labels.
func Labeled(labels map[string]string) MetaOption {
	return func(m *metav1.ObjectMeta) {
		if m.Labels == nil {
			m.Labels = map[string]string{}
		}
		for k, v := range labels {
			m.Labels[k] = v
		}
	}
}

func meta(name, namespace string, opts []MetaOption) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Name: name, Namespace: namespace}
	for _, o := range opts {
		o(&m)
	}
	return m
}

// Namespace is a tenant namespace.
func Namespace(name string, opts ...MetaOption) *corev1.Namespace {
	return &corev1.Namespace{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: meta(name, "", opts),
	}
}

// CloudInitSecret carries NoCloud userData under the key the chart uses.
func CloudInitSecret(name, namespace, userData string, opts ...MetaOption) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: meta(name, namespace, opts),
		StringData: map[string]string{"userdata": userData},
	}
}

// NAD is a NetworkAttachmentDefinition with spec.config verbatim.
func NAD(name, namespace, config string, opts ...MetaOption) *nadv1.NetworkAttachmentDefinition {
	return &nadv1.NetworkAttachmentDefinition{
		TypeMeta:   metav1.TypeMeta{APIVersion: "k8s.cni.cncf.io/v1", Kind: "NetworkAttachmentDefinition"},
		ObjectMeta: meta(name, namespace, opts),
		Spec:       nadv1.NetworkAttachmentDefinitionSpec{Config: config},
	}
}
