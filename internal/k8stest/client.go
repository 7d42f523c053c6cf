package k8stest

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// maxResponse bounds what Do reads of one response.
const maxResponse = 32 << 20

// Client sends JSON requests to the cluster's apiserver as one user.
type Client struct {
	// Server is the apiserver's URL, https://127.0.0.1:PORT.
	Server string
	// User is the user the token authenticates as (admin, tenant-N).
	User string
	// Token is the user's bearer token.
	Token string
	// Kubeconfig is the path of a kubeconfig file for this user (server,
	// CA, token, and the namespace for a restricted user).
	Kubeconfig string

	http *http.Client
}

func newClient(server string, caPEM []byte, user, token, kubeconfig string) (*Client, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("k8stest: no certificate in the CA PEM")
	}
	tr := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		MaxIdleConnsPerHost: 8,
	}
	return &Client{Server: server, User: user, Token: token, Kubeconfig: kubeconfig,
		http: &http.Client{Transport: tr, Timeout: 30 * time.Second}}, nil
}

// HTTPClient returns an http.Client that trusts the cluster's CA (it
// sends no token: set the Authorization header to "Bearer "+Token).
func (c *Client) HTTPClient() *http.Client { return c.http }

// APIError is a response with a status other than 2xx: the apiserver's
// Status object (reason Forbidden, NotFound, AlreadyExists, ...).
type APIError struct {
	Method, Path string
	Code         int
	Reason       string
	Message      string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%s %s: %d %s: %s", e.Method, e.Path, e.Code, e.Reason, e.Message)
}

// IsStatus reports whether err is an APIError with the given HTTP status.
func IsStatus(err error, code int) bool {
	var ae *APIError
	return errors.As(err, &ae) && ae.Code == code
}

// Do sends method to path (/api/v1/..., /apis/batch/v1/...) with in as
// the JSON body (none when nil; a []byte is sent as it is) and decodes a
// 2xx response into out (unless nil). A PATCH is sent as a JSON merge
// patch. Any other status is an *APIError.
func (c *Client) Do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		data, ok := in.([]byte)
		if !ok {
			var err error
			if data, err = json.Marshal(in); err != nil {
				return fmt.Errorf("%s %s: encoding the body: %w", method, path, err)
			}
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Server+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
		if method == http.MethodPatch {
			req.Header.Set("Content-Type", "application/merge-patch+json")
		}
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return fmt.Errorf("%s %s: reading the response: %w", method, path, err)
	}
	if len(data) > maxResponse {
		return fmt.Errorf("%s %s: response over %d bytes", method, path, maxResponse)
	}
	if resp.StatusCode/100 != 2 {
		var st struct{ Reason, Message string }
		_ = json.Unmarshal(data, &st)
		if st.Message == "" {
			st.Message = string(bytes.TrimSpace(data))
		}
		return &APIError{Method: method, Path: path, Code: resp.StatusCode, Reason: st.Reason, Message: st.Message}
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s %s: decoding the response: %w", method, path, err)
		}
	}
	return nil
}
