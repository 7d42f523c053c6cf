package sign

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/sigstore/sigstore-go/pkg/root"
	sgsign "github.com/sigstore/sigstore-go/pkg/sign"
)

// LoadSigningConfig reads a Sigstore signing config v0.2 JSON file
// (media type application/vnd.dev.sigstore.signingconfig.v0.2+json).
func LoadSigningConfig(path string) (*root.SigningConfig, error) {
	sc, err := root.NewSigningConfigFromPath(path)
	if err != nil {
		return nil, fmt.Errorf("%s: reading signing config: %w\nhint: expected a Sigstore signing config v0.2 JSON", path, err)
	}
	return sc, nil
}

// NewKeylessSigner returns a signer that, for each bundle, makes an
// ephemeral key, gets a certificate for it from the Fulcio of cfg with
// idToken, logs the signature to cfg's Rekor logs (when it lists any) and
// gets timestamps from cfg's TSAs (and any WithTimestampURL).
func NewKeylessSigner(cfg *root.SigningConfig, idToken string, opts ...Option) (*Signer, error) {
	if cfg == nil {
		return nil, errors.New("keyless signing needs a signing config")
	}
	if idToken == "" {
		return nil, errors.New("keyless signing needs an OIDC identity token\nhint: --identity-token TOKEN or @FILE, or run in GitHub Actions with id-token: write")
	}
	o, err := applyOptions(opts)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	fsvc, err := root.SelectService(cfg.FulcioCertificateAuthorityURLs(), sgsign.FulcioAPIVersions, now)
	if err != nil {
		return nil, fmt.Errorf("signing config: no usable Fulcio CA: %w", err)
	}
	s := &Signer{opts: o, idToken: idToken, identifier: "keyless (Fulcio " + fsvc.URL + ")"}
	s.fulcio = sgsign.NewFulcio(&sgsign.FulcioOptions{BaseURL: fsvc.URL, Timeout: o.timeout, Retries: 1, Transport: o.transport})
	if len(cfg.RekorLogURLs()) > 0 {
		svcs, err := root.SelectServices(cfg.RekorLogURLs(), cfg.RekorLogURLsConfig(), sgsign.RekorAPIVersions, now)
		if err != nil {
			return nil, fmt.Errorf("signing config: rekor: %w", err)
		}
		for _, svc := range svcs {
			s.rekors = append(s.rekors, sgsign.NewRekor(&sgsign.RekorOptions{BaseURL: svc.URL, Timeout: o.timeout, Retries: 1, Version: svc.MajorAPIVersion}))
		}
	}
	if len(cfg.TimestampAuthorityURLs()) > 0 {
		svcs, err := root.SelectServices(cfg.TimestampAuthorityURLs(), cfg.TimestampAuthorityURLsConfig(), sgsign.TimestampAuthorityAPIVersions, now)
		if err != nil {
			return nil, fmt.Errorf("signing config: timestamp authority: %w", err)
		}
		for _, svc := range svcs {
			s.opts.tsaURLs = append(s.opts.tsaURLs, svc.URL)
		}
	}
	s.addTSAs()
	return s, nil
}

// IDToken resolves the OIDC token for keyless signing: flag is a token,
// or "@FILE" to read one from a file; when flag is empty, the GitHub
// Actions ambient token is requested (ACTIONS_ID_TOKEN_REQUEST_URL and
// ACTIONS_ID_TOKEN_REQUEST_TOKEN, audience "sigstore"). getenv is
// os.Getenv in production.
func IDToken(ctx context.Context, flag string, getenv func(string) string, client *http.Client) (string, error) {
	if name, ok := strings.CutPrefix(flag, "@"); ok {
		b, err := os.ReadFile(name)
		if err != nil {
			return "", fmt.Errorf("reading identity token: %w", err)
		}
		tok := strings.TrimSpace(string(b))
		if tok == "" {
			return "", fmt.Errorf("%s: empty identity token", name)
		}
		return tok, nil
	}
	if flag != "" {
		return flag, nil
	}
	if getenv == nil {
		getenv = os.Getenv
	}
	reqURL, reqTok := getenv("ACTIONS_ID_TOKEN_REQUEST_URL"), getenv("ACTIONS_ID_TOKEN_REQUEST_TOKEN")
	if reqURL == "" || reqTok == "" {
		return "", errors.New("no identity token\nhint: give --identity-token TOKEN or @FILE, or run in GitHub Actions with 'permissions: id-token: write'")
	}
	u, err := url.Parse(reqURL)
	if err != nil {
		return "", fmt.Errorf("ACTIONS_ID_TOKEN_REQUEST_URL: %w", err)
	}
	q := u.Query()
	q.Set("audience", "sigstore")
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "bearer "+reqTok)
	if client == nil {
		client = &http.Client{Timeout: 30 * time.Second}
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("requesting GitHub Actions identity token: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return "", fmt.Errorf("requesting GitHub Actions identity token: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("requesting GitHub Actions identity token: HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	var tr struct {
		Value string `json:"value"`
	}
	if err := json.Unmarshal(body, &tr); err != nil || tr.Value == "" {
		return "", errors.New("requesting GitHub Actions identity token: response has no token value")
	}
	return tr.Value, nil
}
