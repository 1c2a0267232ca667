//! ZooKeeper's `digest` identities: `user:base64(sha1("user:password"))`, as the server's
//! `DigestAuthenticationProvider` derives them, so that a client can tell whether an ACL entry
//! names one of its own credentials without asking the server.
//!
//! SHA-1 (FIPS 180-4) and base64 (RFC 4648, standard alphabet, padded) are written here: both
//! are small, and this is their only use. SHA-1 is what the protocol prescribes for these ids;
//! nothing here relies on it for secrecy.

/// The ACL id of digest credentials `user:password`: `user:base64(sha1("user:password"))`.
///
/// ```
/// // The example from ZooKeeper's administrator's guide (super:test).
/// assert_eq!(
///     zk_locks::client::acl::digest_id("super", "test"),
///     "super:D/InIHSb7yEEbrWz8b9l71RjZJU="
/// );
/// ```
pub fn digest_id(user: &str, password: &str) -> String {
    id_of_credentials(format!("{user}:{password}").as_bytes())
}

/// The ACL id of raw `digest` credentials (`user:password` as sent in addAuth): the text
/// before the first `:`, then `:` and the base64 of the SHA-1 of the whole.
pub(crate) fn id_of_credentials(credentials: &[u8]) -> String {
    let user = credentials
        .split(|b| *b == b':')
        .next()
        .unwrap_or(credentials);
    format!(
        "{}:{}",
        String::from_utf8_lossy(user),
        base64(&sha1(credentials))
    )
}

/// SHA-1 of `data` (FIPS 180-4, section 6.1).
pub(crate) fn sha1(data: &[u8]) -> [u8; 20] {
    let mut h: [u32; 5] = [
        0x6745_2301,
        0xEFCD_AB89,
        0x98BA_DCFE,
        0x1032_5476,
        0xC3D2_E1F0,
    ];
    // Padding: a 1 bit, zeros up to 56 mod 64 bytes, then the length in bits (big-endian u64).
    let mut message = data.to_vec();
    message.push(0x80);
    while message.len() % 64 != 56 {
        message.push(0);
    }
    let bits = (data.len() as u64).wrapping_mul(8);
    message.extend_from_slice(&bits.to_be_bytes());
    for block in message.chunks_exact(64) {
        let mut w = [0u32; 80];
        for (t, word) in block.chunks_exact(4).enumerate() {
            w[t] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for t in 16..80 {
            w[t] = (w[t - 3] ^ w[t - 8] ^ w[t - 14] ^ w[t - 16]).rotate_left(1);
        }
        let [mut a, mut b, mut c, mut d, mut e] = h;
        for (t, wt) in w.iter().enumerate() {
            let (f, k) = match t {
                0..=19 => ((b & c) | (!b & d), 0x5A82_7999),
                20..=39 => (b ^ c ^ d, 0x6ED9_EBA1),
                40..=59 => ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC),
                _ => (b ^ c ^ d, 0xCA62_C1D6),
            };
            let temp = a
                .rotate_left(5)
                .wrapping_add(f)
                .wrapping_add(e)
                .wrapping_add(k)
                .wrapping_add(*wt);
            e = d;
            d = c;
            c = b.rotate_left(30);
            b = a;
            a = temp;
        }
        for (hi, v) in h.iter_mut().zip([a, b, c, d, e]) {
            *hi = hi.wrapping_add(v);
        }
    }
    let mut out = [0u8; 20];
    for (chunk, word) in out.chunks_exact_mut(4).zip(h) {
        chunk.copy_from_slice(&word.to_be_bytes());
    }
    out
}

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Base64 of `data` (RFC 4648 section 4: standard alphabet, `=` padding), as Java's
/// `Base64.getEncoder()`.
pub(crate) fn base64(data: &[u8]) -> String {
    let mut out = String::with_capacity(data.len().div_ceil(3) * 4);
    for group in data.chunks(3) {
        let b = [
            group[0],
            group.get(1).copied().unwrap_or(0),
            group.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= group.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// FIPS 180 examples (and the one-million-`a` message of its test suite).
    #[test]
    fn sha1_matches_the_fips_180_vectors() {
        assert_eq!(
            hex(&sha1(b"abc")),
            "a9993e364706816aba3e25717850c26c9cd0d89d"
        );
        assert_eq!(hex(&sha1(b"")), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
        assert_eq!(
            hex(&sha1(
                b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"
            )),
            "84983e441c3bd26ebaae4aa1f95129e5e54670f1"
        );
        assert_eq!(
            hex(&sha1(&vec![b'a'; 1_000_000])),
            "34aa973cd4c4daa4f61eeb2bdbad27316534016f"
        );
        // 55, 56 and 64 bytes: the padding's edge cases (one block, two blocks, a full block).
        assert_eq!(
            hex(&sha1(&[b'a'; 55])),
            "c1c8bbdc22796e28c0e15163d20899b65621d65a"
        );
        assert_eq!(
            hex(&sha1(&[b'a'; 56])),
            "c2db330f6083854c99d4b5bfb6e8f29f201be699"
        );
        assert_eq!(
            hex(&sha1(&[b'a'; 64])),
            "0098ba824b5c16427bd7a1122a5a442a25ec644d"
        );
    }

    /// RFC 4648 section 10.
    #[test]
    fn base64_matches_the_rfc_4648_vectors() {
        for (plain, encoded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(plain.as_bytes()), encoded, "{plain:?}");
        }
        assert_eq!(base64(&[0xfb, 0xff]), "+/8=");
    }

    #[test]
    fn digest_ids_are_the_servers() {
        assert_eq!(
            digest_id("super", "test"),
            "super:D/InIHSb7yEEbrWz8b9l71RjZJU="
        );
        // The user is the text before the first colon; the password may contain colons.
        assert_eq!(
            id_of_credentials(b"app:pa:ss"),
            format!("app:{}", base64(&sha1(b"app:pa:ss")))
        );
        assert_ne!(digest_id("app", "secret"), digest_id("app", "guessed"));
    }
}
