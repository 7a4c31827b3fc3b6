// The mutual-TLS listener: the same API engine, behind TLS that requires a client certificate
// signed by the operator's CA; the engine then checks the certificate against the
// client-security read model (httpapi.MTLSOptions).

package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/samla/samla/platform/httpapi"
	"github.com/samla/samla/platform/mtlsca"
	"github.com/samla/samla/projections/clientsecurity"
)

// Where a server certificate the CA issues for the listener is kept, under the data dir.
const (
	MTLSServerDir      = "mtls"
	mtlsServerCertFile = "server.crt"
	mtlsServerKeyFile  = "server.key"
	// mtlsServerRenewBefore: a server certificate with less left than this is issued again on
	// start.
	mtlsServerRenewBefore = 30 * 24 * time.Hour
)

// mtlsOptions are the engine's mutual-TLS checks: the read model behind a short cache, and this
// deployment's environment. Every API engine has them, listener or not, so that mTLS-only
// clients are refused on the plain listener of every replica.
func (s *Service) mtlsOptions() httpapi.MTLSOptions {
	return httpapi.MTLSOptions{Lookup: clientsecurity.NewReader(s.models.ClientSecurity), Environment: s.cfg.Environment}
}

// startMTLS serves engine on the mutual-TLS listener, unless it is off (no --mtls-addr) or no
// CA exists yet.
func (s *Service) startMTLS(engine http.Handler) error {
	if s.cfg.MTLSAddr == "" {
		return nil
	}
	files := s.cfg.CAFiles()
	exists, err := files.Exists()
	if err != nil {
		return fmt.Errorf("mutual TLS: %w", err)
	}
	if !exists {
		s.log.Info("mutual-TLS listener off: no CA (samla ca init creates one)", "ca_cert", files.Cert)
		return nil
	}
	caCert, err := mtlsca.LoadCertificate(files.Cert)
	if err != nil {
		return fmt.Errorf("mutual TLS: %w", err)
	}
	ca := &mtlsca.CA{Cert: caCert}
	serverCert, err := s.mtlsServerCertificate(ca, files)
	if err != nil {
		return fmt.Errorf("mutual TLS: %w", err)
	}
	return s.listen("mtls", s.cfg.MTLSAddr, httpapi.MTLSListener(engine), mtlsca.ServerTLSConfig(serverCert, ca.Pool()), httpapi.ServerMaxHeaderBytes, s.budgets.public)
}

// mtlsServerCertificate is the listener's certificate: the files configured, or the one the CA
// issued into the data dir, issued (again) when missing, expiring within 30 days, of another
// CA or not for the listener's host. Issuing needs the CA's key.
func (s *Service) mtlsServerCertificate(ca *mtlsca.CA, files mtlsca.Files) (tls.Certificate, error) {
	if s.cfg.MTLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(s.cfg.MTLSCertFile, s.cfg.MTLSKeyFile)
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("server certificate: %w", err)
		}
		return cert, nil
	}
	hosts := mtlsHosts(s.cfg.MTLSAddr)
	dir := filepath.Join(s.cfg.DataDir, MTLSServerDir)
	certPath, keyPath := filepath.Join(dir, mtlsServerCertFile), filepath.Join(dir, mtlsServerKeyFile)
	now := time.Now()
	cert, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err == nil {
		if err = mtlsca.ServerCertificateUsable(cert, ca.Cert, hosts, mtlsServerRenewBefore, now); err == nil {
			return cert, nil
		}
		s.log.Info("issuing the mutual-TLS listener's certificate again", "reason", err.Error())
	} else if !errors.Is(err, os.ErrNotExist) {
		s.log.Warn("issuing the mutual-TLS listener's certificate again", "reason", err.Error())
	}
	signer, err := mtlsca.Load(files)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("issue the listener's certificate (or give --mtls-cert-file and --mtls-key-file): %w", err)
	}
	certPEM, keyPEM, err := signer.IssueServer(hosts, now)
	if err != nil {
		return tls.Certificate{}, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return tls.Certificate{}, err
	}
	if err := writeFileAtomic(keyPath, keyPEM, 0o600); err != nil {
		return tls.Certificate{}, err
	}
	if err := writeFileAtomic(certPath, certPEM, 0o644); err != nil {
		return tls.Certificate{}, err
	}
	s.log.Info("issued the mutual-TLS listener's certificate", "cert", certPath, "hosts", hosts)
	return tls.X509KeyPair(certPEM, keyPEM)
}

// mtlsHosts are the names the listener's issued certificate is for: localhost, the loopback
// addresses, and the listener's own host when it names one.
func mtlsHosts(addr string) []string {
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return hosts
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return hosts
	}
	for _, h := range hosts {
		if h == host {
			return hosts
		}
	}
	return append(hosts, host)
}

func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	if err := tmp.Chmod(mode); err != nil {
		_ = tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// MTLSAddr is the mutual-TLS listener's bound address, "" when it is off.
func (s *Service) MTLSAddr() string { return s.addrs["mtls"] }

// mtlsMaxConcurrentStreams is how many HTTP/2 streams one connection to the mutual-TLS
// listener may have open at once.
const mtlsMaxConcurrentStreams = 32
