//! Ed25519 key files of a seal: loading them (with the private key's
//! mode checked) and making a pair.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

use ed25519_dalek::pkcs8::{DecodePrivateKey, DecodePublicKey, EncodePrivateKey, EncodePublicKey};
use ed25519_dalek::{SigningKey, VerifyingKey};

use super::invalid;

/// Largest key file read (a PEM key is under 200 bytes).
const MAX_KEY_FILE: u64 = 64 * 1024;

fn read_bounded(path: &Path) -> io::Result<String> {
    let f = File::open(path)?;
    let mut s = String::new();
    f.take(MAX_KEY_FILE).read_to_string(&mut s)?;
    Ok(s)
}

/// Loads the Ed25519 private key of a seal from a PKCS#8 PEM file.
///
/// # Errors
/// `NotFound` (missing), `PermissionDenied` (unreadable), or
/// `InvalidInput` when the file is readable by anyone but its owner (its
/// mode must be 0600 or 0400) or is not an Ed25519 PKCS#8 PEM key; each
/// message names the file and says what to do.
pub fn load_signing_key(path: &Path) -> io::Result<SigningKey> {
    let meta = std::fs::metadata(path)
        .map_err(|e| io::Error::new(e.kind(), format!("seal key_file {}: {e}", path.display())))?;
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(invalid(format!(
            "seal key_file {}: mode {mode:04o} lets others read the private key; it must be 0600 \
             (chmod 600 {})",
            path.display(),
            path.display()
        )));
    }
    let pem = read_bounded(path)
        .map_err(|e| io::Error::new(e.kind(), format!("seal key_file {}: {e}", path.display())))?;
    SigningKey::from_pkcs8_pem(&pem).map_err(|e| {
        invalid(format!(
            "seal key_file {}: not an Ed25519 private key in PKCS#8 PEM ({e}); make one with \
             `dplog-verify keygen`",
            path.display()
        ))
    })
}

/// Loads an Ed25519 public key from a SubjectPublicKeyInfo PEM file
/// (`-----BEGIN PUBLIC KEY-----`).
///
/// # Errors
/// The read error, or `InvalidInput` when it is not such a key.
pub fn load_public_key(path: &Path) -> io::Result<VerifyingKey> {
    let pem = read_bounded(path)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
    VerifyingKey::from_public_key_pem(&pem).map_err(|e| {
        invalid(format!(
            "{}: not an Ed25519 public key in PEM ({e})",
            path.display()
        ))
    })
}

/// Generates an Ed25519 key pair from the OS's random source: the private
/// key to `private` (PKCS#8 PEM, created with mode 0600, refused if it
/// exists) and the public key to `public` (PEM, mode 0644, for
/// verifiers). Returns the public key.
///
/// # Errors
/// `AlreadyExists` for an existing private key file, or the write error.
///
/// # Examples
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let (key, pub_) = (dir.path().join("seal.key"), dir.path().join("seal.pub"));
/// let vk = dplog_sinks::seal::generate_key_pair(&key, &pub_).unwrap();
/// assert_eq!(dplog_sinks::seal::load_public_key(&pub_).unwrap(), vk);
/// assert_eq!(dplog_sinks::seal::load_signing_key(&key).unwrap().verifying_key(), vk);
/// ```
pub fn generate_key_pair(private: &Path, public: &Path) -> io::Result<VerifyingKey> {
    let key = SigningKey::generate(&mut rand_core::OsRng);
    let pem = key
        .to_pkcs8_pem(Default::default())
        .map_err(|e| invalid(format!("encoding the private key: {e}")))?;
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(private)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", private.display())))?;
    f.write_all(pem.as_bytes())?;
    f.sync_all()?;
    let vk = key.verifying_key();
    let pub_pem = vk
        .to_public_key_pem(Default::default())
        .map_err(|e| invalid(format!("encoding the public key: {e}")))?;
    let mut p = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o644)
        .open(public)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", public.display())))?;
    p.write_all(pub_pem.as_bytes())?;
    p.sync_all()?;
    Ok(vk)
}
