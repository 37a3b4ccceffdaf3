package pki

import (
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// writeNew creates path with data and mode, failing if path exists: the
// exclusive create is what keeps a CA from ever being replaced.
func writeNew(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("pki: %s exists already: keep it, or choose another directory", path)
	}
	if err != nil {
		return fmt.Errorf("pki: cannot create %s: %v", path, pathCause(err))
	}
	if err := finish(f, data, mode); err != nil {
		os.Remove(path)
		return err
	}
	return nil
}

// writeReplace writes data to path with mode, replacing it whole: the data
// goes to a temporary file beside it that is renamed over path, so a
// reader sees the old file or the new one, never a half-written key.
func writeReplace(path string, data []byte, mode os.FileMode) error {
	// CreateTemp makes the file 0600, so a key is never readable by
	// others, not even while it is being written.
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("pki: cannot write %s: %v", path, pathCause(err))
	}
	tmp := f.Name()
	if err := finish(f, data, mode); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("pki: cannot write %s: %v", path, pathCause(err))
	}
	return nil
}

// finish sets f's mode, writes data, syncs and closes f. The explicit
// Chmod is because the mode given at create passes through the umask, and
// the modes here are promises (0600 for keys, 0644 for certificates).
func finish(f *os.File, data []byte, mode os.FileMode) error {
	err := f.Chmod(mode)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("pki: cannot write %s: %v", f.Name(), pathCause(err))
	}
	return nil
}

// pathCause is err without the operation and path a *fs.PathError repeats,
// for errors that name the file themselves.
func pathCause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// parseCerts parses every CERTIFICATE block of data, read from file; it
// fails if there is none.
func parseCerts(file string, data []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	sawKey := false
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		switch b.Type {
		case "CERTIFICATE":
			c, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				return nil, fmt.Errorf("pki: %s holds a certificate that does not parse: %v", file, err)
			}
			certs = append(certs, c)
		case "PRIVATE KEY", "EC PRIVATE KEY", "RSA PRIVATE KEY":
			sawKey = true
		}
	}
	switch {
	case len(certs) > 0:
		return certs, nil
	case sawKey:
		return nil, fmt.Errorf("pki: %s holds a private key, not a certificate: give the .pem, not the -key.pem", file)
	}
	return nil, fmt.Errorf("pki: %s is not a PEM certificate: give a .pem file braid certs wrote", file)
}

// readKey reads the private key in file: PKCS#8, SEC 1 (EC) or PKCS#1
// (RSA), so that keys from other tools load too. Its errors never hold
// key bytes.
func readKey(file string) (crypto.Signer, error) {
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("pki: private key %s does not exist: give the -key.pem written with the certificate", file)
	}
	if err != nil {
		return nil, fmt.Errorf("pki: cannot read private key %s: %v", file, pathCause(err))
	}
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return nil, fmt.Errorf("pki: %s is not a PEM private key: give the -key.pem written with the certificate", file)
		}
		var key any
		switch b.Type {
		case "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(b.Bytes)
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(b.Bytes)
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(b.Bytes)
		case "CERTIFICATE":
			return nil, fmt.Errorf("pki: %s holds a certificate, not a private key: give the -key.pem, not the .pem", file)
		default:
			continue // e.g. EC PARAMETERS before the key
		}
		if err != nil {
			return nil, fmt.Errorf("pki: %s holds a private key that does not parse (PKCS#8, EC or RSA expected)", file)
		}
		s, ok := key.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("pki: %s holds a private key of a kind TLS cannot sign with", file)
		}
		return s, nil
	}
}
