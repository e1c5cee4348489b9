//! End-to-end tests: real Postgres (a fresh database per test), real HTTP on loopback.

mod alerts;
mod api;
mod audit;
mod browser;
mod cells;
mod circuit;
mod closing;
mod delivery;
mod delivery_events;
mod durability;
mod event_types;
mod filters;
mod headers;
mod hosts;
mod lifecycle;
mod limits;
mod listing;
mod messages;
mod observe;
mod openapi;
mod operate;
mod ordering;
mod portal_browser;
mod quotas;
mod recover;
mod retry_policy;
