package casource

import (
	"context"
	"errors"
	"fmt"
	"strings"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	guardapi "github.com/webhook-guard/webhook-guard/policy/api/v1alpha1"
	"github.com/webhook-guard/webhook-guard/policy/cabundle"
)

// sourceOf is the source of the CA of the request's mapping.
func sourceOf(req Request) (source, error) {
	return sourceOfKind(req.Owner.CA.Kind(), req)
}

// errUnknownKind is sourceOfKind's answer to a guardapi.CASourceKind it has
// no reader for. Test_sourceOfKind_everyKind fails on it for every kind of
// guardapi.CASourceKinds, so a new kind cannot be forgotten here.
var errUnknownKind = errors.New("webhook-guard cannot read this kind of CA source")

// reader turns a mapping's CA source, which sets its kind's field, into
// the source to read.
type reader func(ca *guardapi.CASource, req Request) (source, error)

// readers is the one place a CA source kind is read: reading needs I/O, so
// it lives here and not in the API package. Keyed by every kind (the
// exhaustive linter checks map literals over an enum; the directive makes
// it check this one where it checks only the maps that ask).
//
//exhaustive:enforce
var readers = map[guardapi.CASourceKind]reader{
	guardapi.CASourceSecret: func(ca *guardapi.CASource, _ Request) (source, error) {
		s := ca.Secret
		return source{key: secretDesc(s.Namespace, s.Name, s.Key), read: func(ctx context.Context, rd client.Reader) (cabundle.CASet, error) {
			return readSecretKeys(ctx, rd, s.Namespace, s.Name, s.Key)
		}}, nil
	},
	guardapi.CASourceConfigMap: func(ca *guardapi.CASource, _ Request) (source, error) {
		c := ca.ConfigMap
		desc := fmt.Sprintf("ConfigMap %s/%s (key %s)", c.Namespace, c.Name, c.Key)
		return source{key: desc, read: func(ctx context.Context, rd client.Reader) (cabundle.CASet, error) {
			return readConfigMap(ctx, rd, c.Namespace, c.Name, c.Key, desc)
		}}, nil
	},
	guardapi.CASourceCertificate: func(ca *guardapi.CASource, _ Request) (source, error) {
		return certificateSource(ca.Certificate.Namespace, ca.Certificate.Name, ""), nil
	},
	guardapi.CASourceIssuer: func(ca *guardapi.CASource, req Request) (source, error) {
		return issuerSource(ca.Issuer, req.ClusterResourceNamespace), nil
	},
	guardapi.CASourceInjectedByCertManager: func(ca *guardapi.CASource, req Request) (source, error) {
		// A pin names the CA in the configuration: the object's annotation
		// (which the decision requires to be the pin) is not read.
		switch pin := ca.InjectedByCertManager; {
		case pin.Certificate != nil:
			return certificateSource(pin.Certificate.Namespace, pin.Certificate.Name, "pinned "+AnnotationInjectCAFrom+" -> "), nil
		case pin.Secret != nil:
			return injectedSecretSource(pin.Secret.Namespace, pin.Secret.Name, "pinned "+AnnotationInjectCAFromSecret+" -> "), nil
		}
		return injectedSource(req.Annotations)
	},
	guardapi.CASourcePEM: func(ca *guardapi.CASource, req Request) (source, error) {
		set, err := cabundle.NewCASet("inline pem of owners["+req.Owner.Name+"]", []byte(ca.PEM))
		return source{key: set.Source, read: func(context.Context, client.Reader) (cabundle.CASet, error) { return set, err }}, nil
	},
}

// sourceOfKind reads the mapping's CA source as its kind's reader says.
func sourceOfKind(kind guardapi.CASourceKind, req Request) (source, error) {
	if kind == "" {
		return source{}, errors.New("the mapping has no CA source")
	}
	read, ok := readers[kind]
	if !ok {
		return source{}, fmt.Errorf("%w: %s", errUnknownKind, kind)
	}
	return read(&req.Owner.CA, req)
}

func certificateSource(ns, name, via string) source {
	desc := via + fmt.Sprintf("Certificate %s/%s", ns, name)
	return source{key: desc, read: func(ctx context.Context, rd client.Reader) (cabundle.CASet, error) {
		var crt cmapi.Certificate
		if err := rd.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &crt); err != nil {
			return cabundle.CASet{}, getError(desc, err)
		}
		if crt.Spec.SecretName == "" {
			return cabundle.CASet{}, &SourceError{Source: desc, Reason: "spec.secretName is empty", Definitive: true}
		}
		set, err := readSecretKeys(ctx, rd, ns, crt.Spec.SecretName, keyCA)
		if err != nil {
			return set, err
		}
		set.Source = desc + " -> " + set.Source
		return set, nil
	}}
}

func issuerSource(ref *guardapi.IssuerRef, clusterResourceNamespace string) source {
	desc := fmt.Sprintf("%s %s", ref.Kind, ref.Name)
	if ref.Kind == "Issuer" {
		desc = fmt.Sprintf("Issuer %s/%s", ref.Namespace, ref.Name)
	}
	return source{key: desc, read: func(ctx context.Context, rd client.Reader) (cabundle.CASet, error) {
		var spec cmapi.IssuerSpec
		secretNS := ref.Namespace
		if ref.Kind == "ClusterIssuer" {
			var ci cmapi.ClusterIssuer
			if err := rd.Get(ctx, types.NamespacedName{Name: ref.Name}, &ci); err != nil {
				return cabundle.CASet{}, getError(desc, err)
			}
			spec, secretNS = ci.Spec, clusterResourceNamespace
		} else {
			var iss cmapi.Issuer
			if err := rd.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, &iss); err != nil {
				return cabundle.CASet{}, getError(desc, err)
			}
			spec = iss.Spec
		}
		if spec.CA == nil || spec.CA.SecretName == "" {
			return cabundle.CASet{}, &SourceError{Source: desc, Reason: "it is not a CA issuer (spec.ca.secretName is empty); use a certificate or secret source for other issuer types", Definitive: true}
		}
		// A CA issuer's Secret holds the CA itself in tls.crt (and its
		// parents, if any, in ca.crt); the issued certificates chain to it.
		set, err := readSecretKeys(ctx, rd, secretNS, spec.CA.SecretName, keyTLS, keyCA)
		if err != nil {
			return set, err
		}
		set.Source = desc + " -> " + set.Source
		return set, nil
	}}
}

func injectedSource(annotations map[string]string) (source, error) {
	if v, ok := annotations[AnnotationInjectCAFrom]; ok {
		ns, name, okRef := strings.Cut(v, "/")
		if !okRef || ns == "" || name == "" {
			return source{}, &SourceError{Source: "annotation " + AnnotationInjectCAFrom, Reason: fmt.Sprintf("value %q is not \"namespace/name\"", v), Definitive: true}
		}
		return certificateSource(ns, name, "annotation "+AnnotationInjectCAFrom+" -> "), nil
	}
	if v, ok := annotations[AnnotationInjectCAFromSecret]; ok {
		ns, name, okRef := strings.Cut(v, "/")
		if !okRef || ns == "" || name == "" {
			return source{}, &SourceError{Source: "annotation " + AnnotationInjectCAFromSecret, Reason: fmt.Sprintf("value %q is not \"namespace/name\"", v), Definitive: true}
		}
		return injectedSecretSource(ns, name, "annotation "+AnnotationInjectCAFromSecret+" -> "), nil
	}
	return source{}, &SourceError{
		Source:     "injectedByCertManager",
		Reason:     fmt.Sprintf("the configuration carries neither %s nor %s", AnnotationInjectCAFrom, AnnotationInjectCAFromSecret),
		Definitive: true,
	}
}

// injectedSecretSource is the ca.crt of the Secret cainjector injects from
// directly; via says how the Secret was named.
func injectedSecretSource(ns, name, via string) source {
	desc := via + secretDesc(ns, name, keyCA)
	return source{key: desc, read: func(ctx context.Context, rd client.Reader) (cabundle.CASet, error) {
		set, err := readSecretKeys(ctx, rd, ns, name, keyCA)
		set.Source = desc
		return set, err
	}}
}

// readSecretKeys reads the certificates in the given keys of a Secret. The
// first key is required; later keys are read when present.
func readSecretKeys(ctx context.Context, rd client.Reader, ns, name string, keys ...string) (cabundle.CASet, error) {
	desc := secretDesc(ns, name, keys[0])
	var s corev1.Secret
	if err := rd.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &s); err != nil {
		return cabundle.CASet{}, getError(desc, err)
	}
	var set cabundle.CASet
	for i, k := range keys {
		data, ok := s.Data[k]
		if !ok || len(data) == 0 {
			if i == 0 {
				return cabundle.CASet{}, &SourceError{Source: desc, Reason: fmt.Sprintf("the Secret has no %q key", k), Definitive: true}
			}
			continue
		}
		part, err := cabundle.NewCASet(desc, data)
		if err != nil {
			return cabundle.CASet{}, &SourceError{Source: secretDesc(ns, name, k), Reason: "the data " + err.Error(), Definitive: true, InvalidData: true}
		}
		if i == 0 {
			set = part
		} else {
			set = set.Union(part)
		}
	}
	set.Source = desc
	// The first key is the one a param can name: it holds the CA itself.
	return set.FromSecret(cabundle.SecretKey{Namespace: ns, Name: name, Key: keys[0]}), nil
}

func readConfigMap(ctx context.Context, rd client.Reader, ns, name, key, desc string) (cabundle.CASet, error) {
	var cm corev1.ConfigMap
	if err := rd.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &cm); err != nil {
		return cabundle.CASet{}, getError(desc, err)
	}
	data := []byte(cm.Data[key])
	if len(data) == 0 {
		data = cm.BinaryData[key]
	}
	if len(data) == 0 {
		return cabundle.CASet{}, &SourceError{Source: desc, Reason: fmt.Sprintf("the ConfigMap has no %q key in data or binaryData", key), Definitive: true}
	}
	set, err := cabundle.NewCASet(desc, data)
	if err != nil {
		return cabundle.CASet{}, &SourceError{Source: desc, Reason: "the data " + err.Error(), Definitive: true, InvalidData: true}
	}
	return set, nil
}
