//! A real browser for the page tests: headless Chromium (Debian's `chromium`) driven over
//! WebDriver (`chromium-driver`). `.ci/run` installs both; without them a test that asks for one
//! fails and says how to install them. Used by the admin page's and the portal's browser tests
//! (tests/e2e) and the cells test's admin page (tests/chaos/cells.rs).

use crate::eventually;
use fantoccini::wd::Capabilities;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::Duration;
use uuid::Uuid;

fn find_binary(env: &str, candidates: &[&str]) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(env) {
        return Some(PathBuf::from(p));
    }
    candidates.iter().map(PathBuf::from).find(|p| p.exists())
}

/// chromedriver on a free loopback port, killed on drop, with a throwaway profile directory.
pub struct Driver {
    child: tokio::process::Child,
    url: String,
    profile: PathBuf,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        let _ = std::fs::remove_dir_all(&self.profile);
    }
}

/// Starts chromedriver and a headless Chromium session through it (1400 × 1000, a throwaway
/// profile); panics, saying what to install, when either is missing
/// (`BREAKWATER_CHROMIUM` and `BREAKWATER_CHROMEDRIVER` name them elsewhere).
pub async fn start_driver() -> (Driver, Client) {
    let chromium = find_binary(
        "BREAKWATER_CHROMIUM",
        &["/usr/bin/chromium", "/usr/bin/chromium-browser"],
    );
    let chromedriver = find_binary("BREAKWATER_CHROMEDRIVER", &["/usr/bin/chromedriver"]);
    let (Some(chromium), Some(chromedriver)) = (chromium, chromedriver) else {
        panic!(
            "the admin page browser test needs headless Chromium and its WebDriver: \
             `apt-get install -y chromium chromium-driver` (what .ci/run does), or set \
             BREAKWATER_CHROMIUM and BREAKWATER_CHROMEDRIVER to their paths"
        );
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let child = tokio::process::Command::new(&chromedriver)
        .arg(format!("--port={port}"))
        .arg("--allowed-ips=127.0.0.1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}", chromedriver.display()));
    let profile = std::env::temp_dir().join(format!("breakwater-chromium-{}", Uuid::new_v4()));
    let driver = Driver {
        child,
        url: format!("http://127.0.0.1:{port}"),
        profile,
    };
    let http = reqwest::Client::new();
    let ready = eventually(Duration::from_secs(20), || async {
        match http.get(format!("{}/status", driver.url)).send().await {
            Ok(r) => r
                .json::<Value>()
                .await
                .is_ok_and(|v| v["value"]["ready"] == true),
            Err(_) => false,
        }
    })
    .await;
    assert!(ready, "chromedriver did not become ready on {}", driver.url);

    let mut caps = Capabilities::new();
    caps.insert("browserName".into(), json!("chrome"));
    caps.insert(
        "goog:chromeOptions".into(),
        json!({
            "binary": chromium,
            "args": [
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--no-first-run", "--window-size=1400,1000",
                format!("--user-data-dir={}", driver.profile.display()),
            ],
        }),
    );
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    let client = ClientBuilder::new(connector)
        .capabilities(caps)
        .connect(&driver.url)
        .await
        .expect("a Chromium session through chromedriver");
    (driver, client)
}

/// Runs `script` in the page and returns its value.
pub async fn js(c: &Client, script: &str) -> Value {
    c.execute(script, vec![]).await.expect("script runs")
}

/// Clicks `css` (retrying while the live page replaces the element between find and click).
pub async fn click(c: &Client, css: &str) {
    let last = std::sync::Mutex::new(None);
    let clicked = eventually(Duration::from_secs(2), || async {
        let err = match c.find(Locator::Css(css)).await {
            Ok(e) => match e.click().await {
                Ok(()) => return true,
                Err(err) => err.to_string(),
            },
            Err(err) => err.to_string(),
        };
        *last.lock().unwrap() = Some(err);
        false
    })
    .await;
    assert!(clicked, "could not click {css}: {:?}", last.lock().unwrap());
}

/// Opens the admin page at `url` (`…/admin`) and waits (up to 10 s) for its operator-key
/// prompt, which it shows before anything else; returns the prompt's input.
pub async fn admin_key_prompt(c: &Client, url: &str) -> fantoccini::elements::Element {
    c.goto(url).await.unwrap();
    c.wait()
        .at_most(Duration::from_secs(10))
        .for_element(Locator::Css("#key-input"))
        .await
        .expect("the key prompt")
}
