package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
)

// serveAdmit stands in for Kyverno's admission server: on addr, with the
// serving certificate Kyverno's renewer keeps in its TLS Secret (read at
// each handshake, as Kyverno's server does), it admits every review on
// every path, unchanged. Kyverno registers its policy webhooks with
// failurePolicy Fail; without an answer kube-apiserver would refuse every
// ClusterPolicy. The test routes kyverno-svc here (an ExternalName
// Service), so the webhook configurations keep Kyverno's Service
// references and kube-apiserver checks this certificate against their
// caBundle, as it does Kyverno's.
func serveAdmit(ctx context.Context, logger logr.Logger, addr string, secret func() (*corev1.Secret, error)) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("admit: %w", err)
	}
	srv := &http.Server{
		ReadHeaderTimeout: 10 * time.Second,
		Handler:           http.HandlerFunc(admit),
		TLSConfig: &tls.Config{
			MinVersion: tls.VersionTLS12,
			GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
				s, err := secret()
				if err != nil {
					return nil, err
				}
				pair, err := tls.X509KeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey])
				return &pair, err
			},
		},
	}
	go func() {
		if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error(err, "admit server stopped")
		}
	}()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	logger.Info("admitting every review", "address", ln.Addr().String())
	return nil
}

func admit(w http.ResponseWriter, r *http.Request) {
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
		return
	}
	review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
	review.Request = nil
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(review); err != nil {
		// kube-apiserver sees a broken response and fails the call.
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
}
