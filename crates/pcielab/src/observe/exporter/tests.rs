use super::metrics::escape;

use super::*;

fn status(head: &[u8]) -> u16 {
    match route(head) {
        Ok((_, Route::Metrics)) => 200,
        Ok((_, Route::NotFound)) => 404,
        Err(r) => r.status,
    }
}

#[test]
fn only_well_formed_gets_of_metrics_succeed() {
    assert_eq!(status(b"GET /metrics HTTP/1.1\r\nHost: x"), 200);
    assert_eq!(status(b"GET /metrics?x=1 HTTP/1.0"), 200);
    assert_eq!(status(b"HEAD /metrics HTTP/1.1"), 200);
    assert_eq!(status(b"GET / HTTP/1.1"), 404);
    assert_eq!(status(b"GET /metricsx HTTP/1.1"), 404);
    assert_eq!(status(b"POST /metrics HTTP/1.1"), 405);
    assert_eq!(status(b"DELETE /metrics HTTP/1.1"), 405);
    for bad in [
        &b"GET /metrics"[..],
        b"GET /metrics HTTP/2.0",
        b"GET metrics HTTP/1.1",
        b"get /metrics HTTP/1.1",
        b"GET  /metrics HTTP/1.1",
        b"\xff\xfe /metrics HTTP/1.1",
        b"",
    ] {
        assert_eq!(status(bad), 400, "{:?}", String::from_utf8_lossy(bad));
    }
}

#[test]
fn heads_are_capped_and_must_end() {
    let mut huge = b"GET /metrics HTTP/1.1\r\nX: ".to_vec();
    huge.extend(std::iter::repeat_n(b'a', MAX_HEAD_BYTES * 2));
    assert_eq!(read_head(&mut huge.as_slice()).unwrap_err().status, 431);
    let cut = b"GET /metrics HTTP/1.1\r\nHost: x\r\n";
    assert_eq!(read_head(&mut cut.as_slice()).unwrap_err().status, 400);
    assert_eq!(read_head(&mut &b""[..]).unwrap(), None);
    let ok = b"GET /metrics HTTP/1.1\r\n\r\nignored body";
    assert_eq!(
        read_head(&mut ok.as_slice()).unwrap().unwrap(),
        b"GET /metrics HTTP/1.1"
    );
}

#[test]
fn label_values_are_escaped() {
    assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
}
