/* Placeholder translation unit for a module folder that has no sources yet. */
typedef int tps_empty_translation_unit;
