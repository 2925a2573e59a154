package console

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"sync"

	"github.com/gorilla/websocket"
	"k8s.io/client-go/rest"
)

// plainProtocol is the subprotocol of KubeVirt's console subresource: raw
// bytes in binary messages.
const plainProtocol = "plain.kubevirt.io"

// Dial opens the serial console of a VMI through the API server
// (GET /apis/subresources.kubevirt.io/v1/namespaces/<ns>/virtualmachineinstances/<name>/console,
// upgraded to a websocket), with the credentials of cfg. KubeVirt's kubecli
// does the same but does not build against current client-go.
func Dial(ctx context.Context, cfg *rest.Config, namespace, name string) (io.ReadWriteCloser, error) {
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, err
	}
	switch u.Scheme {
	case "https", "":
		u.Scheme = "wss"
	case "http":
		u.Scheme = "ws"
	}
	u.Path = path.Join(u.Path, "/apis/subresources.kubevirt.io/v1/namespaces", namespace, "virtualmachineinstances", name, "console")
	tlsConfig, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return nil, err
	}
	d := &upgrader{ctx: ctx, dialer: websocket.Dialer{Proxy: http.ProxyFromEnvironment, TLSClientConfig: tlsConfig, Subprotocols: []string{plainProtocol}}}
	// The wrappers add what the config authenticates with (bearer token,
	// basic auth, impersonation) to the request's headers; the upgrader
	// then dials with them.
	rt, err := rest.HTTPWrappersForConfig(cfg, d)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	if _, err := rt.RoundTrip(req); err != nil {
		return nil, fmt.Errorf("console of %s/%s: %w", namespace, name, err)
	}
	return &wsLine{conn: d.conn}, nil
}

type upgrader struct {
	ctx    context.Context
	dialer websocket.Dialer
	conn   *websocket.Conn
}

func (u *upgrader) RoundTrip(r *http.Request) (*http.Response, error) {
	conn, resp, err := u.dialer.DialContext(u.ctx, r.URL.String(), r.Header)
	if err != nil {
		if resp != nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
			return nil, fmt.Errorf("%w: %s %s", err, resp.Status, body)
		}
		return nil, err
	}
	u.conn = conn
	return resp, nil
}

// wsLine is a websocket as a byte stream.
type wsLine struct {
	conn *websocket.Conn
	r    io.Reader
	wmu  sync.Mutex
}

func (w *wsLine) Read(p []byte) (int, error) {
	for {
		if w.r == nil {
			_, r, err := w.conn.NextReader()
			if err != nil {
				return 0, err
			}
			w.r = r
		}
		n, err := w.r.Read(p)
		if errors.Is(err, io.EOF) {
			w.r = nil
			if n > 0 {
				return n, nil
			}
			continue
		}
		return n, err
	}
}

func (w *wsLine) Write(p []byte) (int, error) {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	if err := w.conn.WriteMessage(websocket.BinaryMessage, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (w *wsLine) Close() error { return w.conn.Close() }
