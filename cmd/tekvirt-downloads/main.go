// Command tekvirt-downloads serves the clients tekvirt ships for users
// (package downloads) over HTTPS, reading its certificate anew on each
// connection so that a renewed Secret is served without a restart.
package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/tekvirt/tekvirt/controllers/downloads"
)

func main() {
	dir := flag.String("dir", "/downloads", "the tree of files to serve")
	listen := flag.String("listen", ":8443", "HTTPS address")
	cert := flag.String("tls-cert", "/etc/tekvirt/tls/tls.crt", "serving certificate")
	key := flag.String("tls-key", "/etc/tekvirt/tls/tls.key", "its key")
	flag.Parse()
	if err := run(*dir, *listen, *cert, *key); err != nil {
		fmt.Fprintln(os.Stderr, "tekvirt-downloads:", err)
		os.Exit(1)
	}
}

func run(dir, listen, cert, key string) error {
	s, err := downloads.New(dir)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Addr: listen, Handler: s, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			c, err := tls.LoadX509KeyPair(cert, key)
			return &c, err
		}},
	}
	slog.Info("serving", "dir", dir, "address", listen)
	if err := srv.ListenAndServeTLS("", ""); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
