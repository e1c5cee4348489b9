//! `breakwater::migrate`, as `serve` runs it at start: on a fresh database it applies every
//! migration, on a current one none, and says which (it logs the same figures).

#[sqlx::test(migrations = false)]
async fn start_up_migration_reports_what_it_applied_then_that_the_schema_is_current(
    pool: sqlx::PgPool,
) {
    let all = breakwater_core::MIGRATOR
        .iter()
        .filter(|m| !m.migration_type.is_down_migration());
    let (count, newest) = (all.clone().count(), all.map(|m| m.version).max());
    assert!(count > 0);

    let first = breakwater::migrate(&pool).await.unwrap();
    assert_eq!((first.applied, first.version), (count, newest));

    let again = breakwater::migrate(&pool).await.unwrap();
    assert_eq!((again.applied, again.version), (0, newest));
}
