package transfer

import (
	"os"
	"path/filepath"
	"testing"

	"carve.dev/carve/test/testpki"
)

// credentials issues a node's credentials from ca and reads them as carve
// node does.
func credentials(t testing.TB, ca *testpki.CA, dnsNames ...string) Credentials {
	t.Helper()
	f := ca.Node(t, dnsNames...)
	creds, err := LoadCredentials(f.Cert, f.Key, f.CA)
	if err != nil {
		t.Fatal(err)
	}
	return creds
}

func TestLoadCredentialsRefusesAFileWithoutCertificate(t *testing.T) {
	f := testpki.New(t, "ca").Node(t, "node-a")
	empty := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(empty, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCredentials(f.Cert, f.Key, empty); err == nil {
		t.Fatal("credentials with a CA file holding no certificate were loaded")
	}
	if _, err := LoadCredentials(f.Cert, f.Key+".missing", f.CA); err == nil {
		t.Fatal("credentials without their key file were loaded")
	}
}
