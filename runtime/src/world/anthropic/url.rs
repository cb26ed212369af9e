//! Base URLs: `scheme://host[:port][/]` parsed into an [`Endpoint`].
//!
//! The provider only ever posts to `/v1/messages` at the root of the host, so a base
//! URL is an origin. Anything more (a path prefix, credentials, a query) would be
//! silently dropped by a looser parser; here it is a typed error instead. `http::Uri`
//! splits the URL into its parts; what it allows and an origin cannot have (user
//! info, a path, a fragment, a host no name or address can be, a signed port) is
//! refused here.

use std::net::Ipv6Addr;

use http::uri::{InvalidUri, Uri};

use super::{BaseUrlDefect, Endpoint, ProviderError, Scheme};

impl Endpoint {
    /// Parses a base URL such as `https://api.anthropic.com` (port 443) or
    /// `http://127.0.0.1:8080`. A trailing `/` is allowed; the host is lowercased;
    /// IPv6 literals go in brackets (`http://[::1]:8080`) and are stored without them.
    pub fn parse(base_url: &str) -> Result<Endpoint, ProviderError> {
        parse_origin(base_url.trim()).map_err(|reason| ProviderError::InvalidBaseUrl {
            url: base_url.to_owned(),
            reason,
        })
    }

    /// The port a URL of this endpoint's scheme implies when it names none.
    pub(super) fn default_port(scheme: Scheme) -> u16 {
        match scheme {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }

    /// The `Host` header value: the port only when it is not the scheme's default,
    /// IPv6 literals bracketed (RFC 9110 §7.2).
    pub(super) fn host_header(&self) -> String {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        if self.port == Self::default_port(self.scheme) {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }
}

fn parse_origin(url: &str) -> Result<Endpoint, BaseUrlDefect> {
    // `http::Uri` drops a fragment without a word; in a base URL it is a mistake.
    if url.contains('#') {
        return Err(BaseUrlDefect::QueryOrFragment);
    }
    let uri: Uri = url.parse().map_err(|error| unparsable(url, &error))?;
    let scheme = match uri.scheme_str() {
        None => return Err(BaseUrlDefect::MissingScheme),
        Some("http") => Scheme::Http,
        Some("https") => Scheme::Https,
        Some(other) => return Err(BaseUrlDefect::UnsupportedScheme(other.to_owned())),
    };
    // A URI with a scheme always has an authority; `http::Uri` refuses one without.
    let authority = uri.authority().ok_or(BaseUrlDefect::MissingHost)?.as_str();
    if uri.query().is_some() {
        return Err(BaseUrlDefect::QueryOrFragment);
    }
    // `http::Uri` gives an absolute URI without a path the path `/`.
    if uri.path() != "/" {
        return Err(BaseUrlDefect::Path(uri.path().to_owned()));
    }
    if authority.contains('@') {
        return Err(BaseUrlDefect::UserInfo);
    }
    let (host, port_text) = split_host_port(authority)?;
    let port = match port_text {
        None => Endpoint::default_port(scheme),
        // `u16::from_str` (and so `http::uri::Port`) takes a leading `+`; a port is digits.
        Some(text) => match text.parse::<u16>() {
            Ok(port) if port != 0 && text.bytes().all(|b| b.is_ascii_digit()) => port,
            _ => return Err(BaseUrlDefect::InvalidPort(text.to_owned())),
        },
    };
    Ok(Endpoint { scheme, host, port })
}

/// Why `http::Uri` refused `url`, named by the part at fault where that is plain.
fn unparsable(url: &str, error: &InvalidUri) -> BaseUrlDefect {
    match url.split_once("://") {
        None => BaseUrlDefect::MissingScheme,
        Some((_, rest)) if rest.is_empty() || rest.starts_with(['/', '?']) => {
            BaseUrlDefect::MissingHost
        }
        Some(_) => BaseUrlDefect::Malformed(error.to_string()),
    }
}

/// Splits an authority that `http::Uri` accepted, `host[:port]` or `[ipv6][:port]`,
/// and checks the host, which `http::Uri` lets hold any character a URI can.
fn split_host_port(authority: &str) -> Result<(String, Option<&str>), BaseUrlDefect> {
    if let Some(bracketed) = authority.strip_prefix('[') {
        let (literal, after) = bracketed
            .split_once(']')
            .ok_or_else(|| BaseUrlDefect::InvalidHost(authority.to_owned()))?;
        if literal.parse::<Ipv6Addr>().is_err() {
            return Err(BaseUrlDefect::InvalidHost(literal.to_owned()));
        }
        let port = match after {
            "" => None,
            _ => Some(
                after
                    .strip_prefix(':')
                    .ok_or_else(|| BaseUrlDefect::InvalidHost(authority.to_owned()))?,
            ),
        };
        return Ok((literal.to_ascii_lowercase(), port));
    }
    let (host, port) = match authority.split_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (authority, None),
    };
    if host.is_empty() {
        return Err(BaseUrlDefect::MissingHost);
    }
    let valid_chars = host
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'));
    if !valid_chars || host.starts_with(['-', '.']) {
        return Err(BaseUrlDefect::InvalidHost(host.to_owned()));
    }
    Ok((host.to_ascii_lowercase(), port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_header_omits_default_port_and_brackets_ipv6() {
        let api = Endpoint::parse("https://api.anthropic.com").unwrap();
        assert_eq!(api.host_header(), "api.anthropic.com");
        let local = Endpoint::parse("http://127.0.0.1:8080").unwrap();
        assert_eq!(local.host_header(), "127.0.0.1:8080");
        let v6 = Endpoint::parse("http://[::1]:9000/").unwrap();
        assert_eq!(v6.host, "::1");
        assert_eq!(v6.host_header(), "[::1]:9000");
    }
}
