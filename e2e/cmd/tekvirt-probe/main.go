// Command tekvirt-probe is the attacker's toolbox of the e2e scenarios that
// run inside a cluster (a hosted cluster's Pod on its worker's network):
// each argument is one probe, "kind,name,arg...", and each prints one line
// "name=result" (then "probes done").
//
//	tcp,NAME,HOST:PORT              open | closed
//	https,NAME,URL                  "<status> <body>" of an anonymous GET (no
//	                                certificate checked), or "error <why>"
//	tokens,NAME,DIR,URL             every file named "token" under DIR used as
//	                                a bearer token for URL: "<n> <statuses>"
//	vxlan-dns,NAME,HOST:PORT,VNI,DSTMAC,SRC,DST,QNAME
//	                                a DNS query for QNAME from SRC to DST:53
//	                                inside a VXLAN frame to the tunnel
//	                                endpoint HOST:PORT: "sent" or "error"
package main

import (
	"crypto/tls"
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
