// Command tekvirt-probe is the attacker's toolbox of the e2e scenarios that
// run inside a cluster (a hosted cluster's Pod on its worker's network):
// each argument is one probe, "kind,name,arg...", and each prints one line
// "name=result" (then "probes done").
//
//	tcp,NAME,HOST:PORT              open | closed
//	https,NAME,URL                  "<status> <body>" of an anonymous GET (no
//	                                certificate checked), or "error <why>"
//	tls-cert,NAME,HOST:PORT,CRT,KEY a TLS connection presenting the client
//	                                certificate in files CRT and KEY:
//	                                "accepted" (the server speaks first or
//	                                waits) or "refused <why>"
//	tokens,NAME,DIR,URL             every file named "token" under DIR used as
//	                                a bearer token for URL: "<n> <statuses>"
//	vxlan-dns,NAME,HOST:PORT,VNI,DSTMAC,SRC,DST,QNAME
//	                                a DNS query for QNAME from SRC to DST:53
//	                                inside a VXLAN frame to the tunnel
//	                                endpoint HOST:PORT: "sent" or "error"
package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

func main() {
	for _, arg := range os.Args[1:] {
		f := strings.Split(arg, ",")
		if len(f) < 3 {
			fmt.Printf("%s=error: want kind,name,arg...\n", arg)
			continue
		}
		fmt.Printf("%s=%s\n", f[1], probe(f[0], f[2:]))
	}
	fmt.Println("probes done")
}

func probe(kind string, args []string) string {
	switch {
	case kind == "tcp" && len(args) == 1:
		conn, err := net.DialTimeout("tcp", args[0], 3*time.Second)
		if err != nil {
			return "closed"
		}
		conn.Close()
		return "open"
	case kind == "https" && len(args) == 1:
		return get(args[0], "")
	case kind == "tls-cert" && len(args) == 3:
		return withCertificate(args[0], args[1], args[2])
	case kind == "tokens" && len(args) == 2:
		return withTokens(args[0], args[1])
	case kind == "vxlan-dns" && len(args) == 6:
		if err := sendVXLANQuery(args); err != nil {
			return "error " + err.Error()
		}
		return "sent"
	}
	return fmt.Sprintf("error: unknown probe %s with %d arguments", kind, len(args))
}

var client = &http.Client{
	Timeout:   5 * time.Second,
	Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // the probe asks who answers, not whether to trust it
}

// get is "<status> <body's first line>" of a GET of url, with token as
// bearer when set.
func get(url, token string) string {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return "error " + err.Error()
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return "error " + oneLine(err.Error())
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
	return strconv.Itoa(resp.StatusCode) + " " + oneLine(string(b))
}

// withCertificate connects to addr over TLS with the client certificate
// in certFile and keyFile. Under TLS 1.3 a server refuses a client's
// certificate after the client's handshake is done, so the verdict is the
// first read: an alert is a refusal, bytes or silence acceptance.
func withCertificate(addr, certFile, keyFile string) string {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return "error " + oneLine(err.Error())
	}
	d := &net.Dialer{Timeout: 3 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2"},
		InsecureSkipVerify: true}) //nolint:gosec // the probe asks whether the server takes the certificate, not whether to trust the server
	if err != nil {
		return "refused " + oneLine(err.Error())
	}
	defer func() { _ = conn.Close() }()
	_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	_, err = conn.Read(make([]byte, 1))
	var ne net.Error
	if err == nil || errors.As(err, &ne) && ne.Timeout() {
		return "accepted"
	}
	return "refused " + oneLine(err.Error())
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// withTokens uses every file named token under dir against url.
func withTokens(dir, url string) string {
	var statuses []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "token" {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil || len(b) > 8<<10 {
			return nil
		}
		statuses = append(statuses, strings.SplitN(get(url, strings.TrimSpace(string(b))), " ", 2)[0])
		return nil
	})
	return fmt.Sprintf("%d %s", len(statuses), strings.Join(statuses, " "))
}
